package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

// Listings escape what a producer wrote (terminal escapes, bidi overrides)
// in tables, and every listing has --output json and --json.
func TestListingsEscapeAndPrintJSON(t *testing.T) {
	_, flags, conn, outbox := cliTables(t)
	inbox := flags[len(flags)-1]
	ids := insertDead(t, conn, outbox, "\x1b[31mRED\x1b[0m and \u202eright-to-left")
	insertParked(t, conn, inbox, ids[0], "\x1b]0;pwned\x07 title")
	with := func(args ...string) []string { return append(args, flags...) }
	for _, c := range [][]string{{"dead", "list"}, {"inbox", "list"}} {
		out, code := run(t, nil, with(c...)...)
		if code != 0 || !strings.Contains(out, ids[0]) {
			t.Fatalf("txbox %v: exit %d\n%s", c, code, out)
		}
		if strings.ContainsAny(out, "\x1b\x07\u202e") || !strings.Contains(out, `\x1b`) {
			t.Fatalf("txbox %v printed control characters raw: %q", c, out)
		}
	}
	for _, c := range [][]string{{"dead", "list"}, {"inbox", "list"}, {"stats"}} {
		for _, f := range [][]string{{"--output", "json"}, {"-o", "json"}, {"--json"}} {
			out, code := run(t, nil, with(append(c, f...)...)...)
			if code != 0 || !json.Valid([]byte(out)) {
				t.Fatalf("txbox %v %v: exit %d, not JSON:\n%s", c, f, code, out)
			}
			if c[0] != "stats" && !strings.Contains(out, `\u001b[31mRED`) && !strings.Contains(out, `\u001b]0;pwned`) {
				t.Fatalf("txbox %v %v: JSON lost the value: %s", c, f, out)
			}
		}
		if out, code := run(t, nil, with(append(c, "--output", "yaml")...)...); code != 2 || !strings.Contains(out, "--output (TXBOX_OUTPUT)") {
			t.Fatalf("txbox %v --output yaml: exit %d\n%s", c, code, out)
		}
	}
}

// go-redis writes its own log lines unless routed: with --log-format json,
// every line on stderr is JSON, also while the relay retries a Redis that
// is down.
func TestJSONLogsAreAllJSON(t *testing.T) {
	db, flags, _, _ := cliTables(t)
	_ = db
	dead := "redis://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	out := runUntil(t, "broker unavailable", append([]string{"relay", "--broker", dead, "--log-format", "json"}, flags...)...)
	checkJSONLines(t, out)
	if !strings.Contains(out, `"lib":"go-redis"`) {
		t.Fatalf("go-redis's own log line is missing (not routed through slog?):\n%s", out)
	}
}

func checkJSONLines(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a line that is not JSON: %q\nin:\n%s", line, out)
		}
	}
}

// A relay stopped by SIGTERM after a clean run logs no warning (before: the
// NATS client's close was logged as "WARN nats: disconnected ... err=<nil>").
func TestCleanStopLogsNoWarning(t *testing.T) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		if _, err := os.Stat("/usr/sbin/nats-server"); err != nil {
			testenv.Missing(t, "nats-server")
		}
	}
	srv := testenv.StartNATS(t)
	_, flags, _, _ := cliTables(t)
	out := runUntil(t, "relay started", append([]string{"relay", "--broker", srv.URL, "--nats-create-stream", "--log-format", "json"}, flags...)...)
	checkJSONLines(t, out)
	if !strings.Contains(out, "relay stopped") {
		t.Fatalf("no clean stop:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct{ Level string }
		_ = json.Unmarshal([]byte(line), &rec)
		if rec.Level != "INFO" && rec.Level != "DEBUG" {
			t.Fatalf("a clean run and stop logged %s: %s", rec.Level, line)
		}
	}
}
