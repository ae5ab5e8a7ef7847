package main_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

func run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// Bad configuration fails at start with one line naming the setting, and a
// password never reaches the output.
func TestBadConfigurationOneLineNamesSetting(t *testing.T) {
	for _, c := range []struct {
		env   []string
		args  []string
		names string
	}{
		{nil, []string{"stats"}, "--db (TXBOX_DB)"},
		{nil, []string{"stats", "--db", "oracle://scott:tiger@db/x"}, "--db (TXBOX_DB)"},
		{nil, []string{"stats", "--db", "not a url"}, "--db (TXBOX_DB)"},
		{[]string{"TXBOX_DB=postgres://u:hunter2@127.0.0.1:1/x"}, []string{"relay"}, "--broker (TXBOX_BROKER)"},
		{nil, []string{"relay", "--db", "postgres://u:hunter2@127.0.0.1:1/x", "--broker", "kafka9://x"}, "--broker (TXBOX_BROKER)"},
		{[]string{"TXBOX_BATCH_SIZE=lots"}, []string{"relay"}, "--batch-size (TXBOX_BATCH_SIZE)"},
		{nil, []string{"relay", "--topic", "x.{aggregate}", "--db", "postgres://u:hunter2@127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1"}, "--topic (TXBOX_TOPIC)"},
		{nil, []string{"stats", "--outbox-table", "outbox; DROP TABLE x", "--db", "postgres://127.0.0.1:1/x"}, "--outbox-table (TXBOX_OUTBOX_TABLE)"},
		{[]string{"TXBOX_LOG_LEVEL=loud"}, []string{"stats"}, "--log-level (TXBOX_LOG_LEVEL)"},
		{nil, []string{"cleanup", "--db", "postgres://127.0.0.1:1/x", "--inbox-retention", "48h"}, "--inbox-retention"},
		{nil, []string{"dead", "replay", "--db", "postgres://127.0.0.1:1/x"}, "filter"},
	} {
		out, code := run(t, c.env, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.names) {
			t.Fatalf("txbox %v: exit %d, want 2 and one line naming %s; got:\n%s", c.args, code, c.names, out)
		}
		if strings.Contains(out, "hunter2") || strings.Contains(out, "tiger") {
			t.Fatalf("password printed: %s", out)
		}
	}
}

func TestUnreachableDatabaseRedactsPassword(t *testing.T) {
	out, code := run(t, nil, "stats", "--db", "postgres://u:hunter2@127.0.0.1:1/x")
	if code == 0 || strings.Contains(out, "hunter2") || !strings.Contains(out, "xxxxx") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
