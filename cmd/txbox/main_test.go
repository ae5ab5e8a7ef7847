package main_test

import (
	"errors"
	"net/url"
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
	return string(out), exitCode(t, err)
}

// exitCode is the exit code of a command that ran with the error err; a
// command that could not be run at all fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
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
		{nil, []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--cleanup-every", "-1h"}, "--cleanup-every (TXBOX_CLEANUP_EVERY)"},
		{nil, []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--long-transaction-warn", "-1s"}, "--long-transaction-warn (TXBOX_LONG_TRANSACTION_WARN)"},
		{nil, []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--cleanup-every", "10ms"}, "--cleanup-every (TXBOX_CLEANUP_EVERY)"},
		{nil, []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--cleanup-every", "1h", "--cleanup-older-than", "0s"}, "--cleanup-older-than (TXBOX_CLEANUP_OLDER_THAN)"},
		{nil, []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--cleanup-every", "1h", "--cleanup-inbox-retention", "48h"}, "--cleanup-inbox-retention (TXBOX_CLEANUP_INBOX_RETENTION)"},
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

// A --db without a scheme is named as such, its user name shown as a user
// name (not hidden as if it were a password), a password still hidden.
func TestDatabaseURLWithoutScheme(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{"root@127.0.0.1/probe1", `"root@127.0.0.1/probe1" has no scheme: want postgres://, mysql:// or sqlite:// in front (e.g. postgres://root@127.0.0.1/probe1`},
		{"root:hunter2@127.0.0.1/probe1", `"root:xxxxx@127.0.0.1/probe1" has no scheme`},
		{"app:hunter2@tcp(127.0.0.1:3306)/shop", `"xxxxx@tcp(127.0.0.1:3306)/shop" has no scheme`},
	} {
		out, code := run(t, nil, "stats", "--db", c.db)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, "--db (TXBOX_DB)") || !strings.Contains(out, c.want) || strings.Contains(out, "hunter2") {
			t.Fatalf("stats --db %s: exit %d, want 2 and one line with %q:\n%s", c.db, code, c.want, out)
		}
	}
}

// A connection error is not repeated: pgx reports each try (TLS, then
// plain) on a line of its own, and both fail alike.
func TestConnectErrorNotRepeated(t *testing.T) {
	dbs := []string{"postgres://u@127.0.0.1:1/x"}
	if u, err := url.Parse(testenv.URL(t, "TXBOX_TEST_POSTGRES")); err == nil {
		u.User = url.User("no_such_role_txbox")
		dbs = append(dbs, u.String())
	}
	for _, db := range dbs {
		out, code := run(t, nil, "stats", "--db", db)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 1 || len(lines) != 1 {
			t.Fatalf("stats --db %s: exit %d, want 1 and one line:\n%s", db, code, out)
		}
		for _, what := range []string{"connect: connection refused", "does not exist"} {
			if n := strings.Count(out, what); n > 1 {
				t.Fatalf("stats --db %s says %q %d times:\n%s", db, what, n, out)
			}
		}
		if strings.Contains(out, ":;") || strings.Contains(out, "\t") {
			t.Fatalf("stats --db %s: the lines of the error were joined badly:\n%s", db, out)
		}
	}
}
