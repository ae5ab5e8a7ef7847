package main_test

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres"
)

// secrets are the passwords the tests put in URLs; none may be printed.
var secrets = []string{"s3cret", "t0psecret", "s3 cret", "s3%63ret"}

func assertRedacted(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Fatalf("%s printed the password %q:\n%s", what, s, out)
		}
	}
}

// Every error the CLI prints for a database URL with a password, in every
// shape a URL or DSN can carry one, has the password redacted, in one line.
func TestCLIErrorsRedactPasswords(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	dbs := []string{
		"postgres://u:s3cret@" + dead + "/x",
		"postgres://u@" + dead + "/x?sslmode=disable&password=s3cret",
		"postgres://u:s3cret@" + dead + ",127.0.0.1:2/x",
		"postgresql://u:t0psecret@" + dead + "/x?connect_timeout=1",
		"postgres://u:s3cret@" + dead + "/x?sslmode=bogus",
		"mysql://root:s3cret@" + dead + "/test",
		"mysql://root:s3cret@" + dead + "/test?tls=bogus",
		"mysql://root:s3%63ret@" + dead + "/test?timeout=forever",
		"host=127.0.0.1 port=1 user=u password=s3cret dbname=x",
		"u:s3cret@tcp(127.0.0.1:1)/test",
		"oracle://scott:s3cret@db/x",
		"postgres://u:s3 cret@" + dead + "/x",
	}
	if my := os.Getenv("TXBOX_TEST_MYSQL"); my == "" {
		// The local MariaDB refuses a wrong password: its error names the
		// user, never the password.
		dbs = append(dbs, "mysql://root:s3cret@127.0.0.1:3306/test")
	}
	// The relay waits for a database it cannot reach unless told to fail
	// fast.
	cmds := [][]string{{"stats"}, {"migrate"}, {"dead", "list"}, {"inbox", "list"}, {"cleanup"}, {"relay", "--broker", "nats://" + dead, "--fail-fast"}}
	for i, db := range dbs {
		cmd := cmds[i%len(cmds)]
		for _, viaEnv := range []bool{false, true} {
			args := append([]string(nil), cmd...)
			var env []string
			if viaEnv {
				env = []string{"TXBOX_DB=" + db}
			} else {
				args = append(args, "--db", db)
			}
			out, code := run(t, env, args...)
			what := "txbox " + strings.Join(cmd, " ") + " with " + db
			assertRedacted(t, what, out)
			if code == 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 1 {
				t.Fatalf("%s: exit %d, want a failure in one line:\n%s", what, code, out)
			}
		}
	}
}

// A running relay logs its database and broker with the passwords
// redacted, whether the broker is down (retry warnings, a server list) or
// up, in text and JSON logs, at debug level, until SIGTERM.
func TestRelayLogsRedactPasswords(t *testing.T) {
	s := storeenv.OpenPostgres(t, postgres.Options{})
	tb := s.Tables()
	pg, err := url.Parse(testenv.URL(t, "TXBOX_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	// The test database trusts local connections, so the password is
	// carried along but not needed.
	pg.User = url.UserPassword(pg.User.Username(), "s3cret")
	if _, err := exec.LookPath("nats-server"); err != nil {
		if _, err := os.Stat("/usr/sbin/nats-server"); err != nil {
			testenv.Missing(t, "nats-server")
		}
	}
	srv := testenv.StartNATS(t)
	port := strings.TrimPrefix(srv.URL, "nats://")
	dead := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	base := []string{"relay", "--db", pg.String(), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox, "--migrate",
		"--log-level", "debug", "--poll-interval", "50ms"}
	for _, c := range []struct {
		name, broker, until string
		extra               []string
	}{
		{"broker down, server list", "nats://u:s3cret@" + dead + ",nats://v:t0psecret@127.0.0.1:2", "broker unavailable", nil},
		{"broker token down", "nats://t0psecret@" + dead, "broker unavailable", []string{"--log-format", "json"}},
		{"broker up", "nats://u:s3cret@" + port, "relay started", []string{"--nats-create-stream"}},
		{"broker up, JSON logs", "nats://u:t0psecret@" + port, "relay started", []string{"--nats-create-stream", "--log-format", "json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(append(append([]string(nil), base...), "--broker", c.broker), c.extra...)
			out := runUntil(t, c.until, args...)
			assertRedacted(t, "txbox relay ("+c.name+")", out)
			if !strings.Contains(out, "xxxxx") {
				t.Fatalf("no redacted URL in the relay's output:\n%s", out)
			}
		})
	}
}

// runUntil runs the binary until its output contains marker (at most 15 s),
// then stops it with SIGTERM and returns everything it printed.
func runUntil(t *testing.T, marker string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	logs, done := testenv.StartLogged(t, cmd)
	output := logs.String
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(output(), marker) {
		select {
		case <-done:
			t.Fatalf("txbox %v exited before %q:\n%s", args, marker, output())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("no %q after 15s:\n%s", marker, output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !testenv.StopProcess(cmd.Process, syscall.SIGTERM, done, 10*time.Second) {
		t.Fatalf("relay did not stop on SIGTERM:\n%s", output())
	}
	return output()
}

// Table and schema names are validated identifiers: one with SQL in it is
// refused (exit 2, one line naming the setting) before any connection is
// made, from the flag or its environment variable, for every command and
// every database.
func TestTableNamesWithSQLRefusedBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	sqlite := filepath.Join(t.TempDir(), "never.db")
	dbs := []string{"postgres://u:s3cret@" + addr + "/x", "mysql://root:s3cret@" + addr + "/test", "sqlite://" + sqlite}
	names := []string{"x; DROP TABLE users", `t"--`, "o'); DELETE FROM y; --", "1abc", strings.Repeat("n", 64), "a.b", "inbox_event\n"}
	flags := []struct{ flag, env, field string }{
		{"--schema", "TXBOX_SCHEMA", "--schema (TXBOX_SCHEMA)"},
		{"--outbox-table", "TXBOX_OUTBOX_TABLE", "--outbox-table (TXBOX_OUTBOX_TABLE)"},
		{"--inbox-table", "TXBOX_INBOX_TABLE", "--inbox-table (TXBOX_INBOX_TABLE)"},
	}
	cmds := [][]string{{"stats"}, {"migrate"}, {"relay", "--broker", "nats://" + addr}, {"dead", "list"}, {"inbox", "list"}, {"cleanup"}}
	n := 0
	for fi, f := range flags {
		for ci, cmd := range cmds {
			name := names[(fi+ci)%len(names)]
			db := dbs[(fi*len(cmds)+ci)%len(dbs)]
			args := append(append([]string(nil), cmd...), "--db", db)
			var env []string
			if ci%2 == 0 {
				args = append(args, f.flag, name)
			} else {
				env = []string{f.env + "=" + name}
			}
			out, code := run(t, env, args...)
			n++
			if code != 2 || len(strings.Split(strings.TrimSpace(out), "\n")) != 1 || !strings.Contains(out, f.field) {
				t.Errorf("txbox %v %v: exit %d, want 2 and one line naming %s:\n%s", cmd, env, code, f.field, out)
			}
			assertRedacted(t, "txbox "+strings.Join(cmd, " "), out)
		}
	}
	if c := conns.Load(); c != 0 {
		t.Errorf("%d connections were made for %d refused configurations", c, n)
	}
	if _, err := os.Stat(sqlite); !os.IsNotExist(err) {
		t.Errorf("the SQLite file was created: %v", err)
	}
}
