package main_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// A relay started while its broker is down exports its readiness and
// connection gauges from the first scrape, at 0, with /readyz naming the
// broker; it waits, and once the broker is there it becomes ready and
// delivers. Polling and CDC share the start.
func TestRelayWaitsForBrokerAtStart(t *testing.T) {
	for _, mode := range []string{"poll", "cdc"} {
		t.Run(mode, func(t *testing.T) {
			pt := promtool(t)
			dest := brokerenv.NATS{}.Setup(t)
			dest.Stop() // the stream stays on disk; the port is closed
			args, conn, outbox := startupTables(t, mode)
			id := insertEvent(t, conn, outbox)
			p := startRelayProcess(t, nil, append(append(args, "--broker", dest.URL, "--topic", dest.Topic), dest.Args...)...)

			sc, text := scrapeURL(t, p.base+"/metrics")
			if sc.value("txbox_relay_ready", "store", "postgres", "broker", "nats") != 0 || sc.value("txbox_relay_broker_up", "store", "postgres", "broker", "nats") != 0 {
				t.Fatalf("before the broker was reached: ready %v, broker_up %v (-1: missing), want 0 and 0\n%s",
					sc.value("txbox_relay_ready"), sc.value("txbox_relay_broker_up"), text)
			}
			checkMetricsText(t, pt, text)
			testenv.WaitFor(t, time.Minute, "the database to be reached while the broker is not", func() bool {
				sc, _ := scrapeURL(t, p.base+"/metrics")
				return sc.value("txbox_relay_database_up") == 1
			})
			code, body := probe(p.base + "/readyz")
			if code != 503 || !strings.Contains(body, "broker: not reached yet") || !strings.Contains(body, "nats") {
				t.Fatalf("/readyz while the broker was never reached: %d %q, want 503 naming the broker and its error", code, body)
			}
			if code, body := probe(p.base + "/healthz"); code != 200 {
				t.Fatalf("/healthz while waiting for the broker: %d %q, want 200 (the process does what it should)", code, body)
			}
			if !strings.Contains(p.logs.String(), "broker unreachable at start") {
				t.Fatalf("no log line says the relay waits for its broker:\n%s", p.logs.String())
			}
			p.mustRun(t)

			dest.Start()
			p.waitReadyAndDelivered(t, 1)
			waitStored(t, dest, id)
			if !strings.Contains(p.logs.String(), "broker reached") {
				t.Fatalf("no log line says the wait for the broker ended:\n%s", p.logs.String())
			}
		})
	}
}

// The same for a database whose port is closed at start: the gauges at 0,
// /readyz naming the database, then a database that answers at that port
// and a relay that becomes ready and delivers.
func TestRelayWaitsForDatabaseAtStart(t *testing.T) {
	for _, mode := range []string{"poll", "cdc"} {
		t.Run(mode, func(t *testing.T) {
			pt := promtool(t)
			dest := brokerenv.NATS{}.Setup(t)
			args, conn, outbox := startupTables(t, mode)
			id := insertEvent(t, conn, outbox)
			pg, err := url.Parse(flagValue(args, "--db"))
			if err != nil {
				t.Fatal(err)
			}
			fw := newForwarder(t, pg.Host)
			// The local server trusts the test's connections: the password
			// is carried, and must never be printed.
			pg.Host, pg.User = fw.addr, url.UserPassword(pg.User.Username(), "s3cret")
			args = replaceFlag(args, "--db", pg.String())
			p := startRelayProcess(t, nil, append(append(args, "--broker", dest.URL, "--topic", dest.Topic), dest.Args...)...)

			sc, text := scrapeURL(t, p.base+"/metrics")
			if sc.value("txbox_relay_ready") != 0 || sc.value("txbox_relay_database_up", "store", "postgres", "broker", "nats") != 0 {
				t.Fatalf("before the database was reached: ready %v, database_up %v (-1: missing), want 0 and 0\n%s",
					sc.value("txbox_relay_ready"), sc.value("txbox_relay_database_up"), text)
			}
			checkMetricsText(t, pt, text)
			testenv.WaitFor(t, time.Minute, "/readyz to name the database's error", func() bool {
				code, body := probe(p.base + "/readyz")
				return code == 503 && strings.Contains(body, "database: not reached yet") && strings.Contains(body, "connection refused")
			})
			if !strings.Contains(p.logs.String(), "database unreachable at start") {
				t.Fatalf("no log line says the relay waits for its database:\n%s", p.logs.String())
			}
			p.mustRun(t)

			fw.start(t)
			p.waitReadyAndDelivered(t, 1)
			waitStored(t, dest, id)
			if !strings.Contains(p.logs.String(), "database reached") {
				t.Fatalf("no log line says the wait for the database ended:\n%s", p.logs.String())
			}
			assertRedacted(t, "a relay waiting for its database", p.logs.String())

			// The database going away later shows too, in the metrics alone,
			// with no /readyz probe to make the relay look.
			fw.stop()
			testenv.WaitFor(t, 20*time.Second, "database_up and ready to fall to 0 once the database went away", func() bool {
				sc, _ := scrapeURL(t, p.base+"/metrics")
				return sc.value("txbox_relay_database_up") == 0 && sc.value("txbox_relay_ready") == 0
			})
		})
	}
}

// With --fail-fast (or TXBOX_FAIL_FAST) a relay whose database or broker
// cannot be reached at start exits 1 at once, in one line naming the
// setting; without it, the same relay waits.
func TestRelayFailFast(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	_, flags, _, _ := cliTables(t)
	db := replaceFlag(flags, "--db", "postgres://u:s3cret@"+dead+"/x")
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		names string
	}{
		{"database", nil, append([]string{"relay", "--broker", "nats://" + dead, "--fail-fast"}, db...), "--db (TXBOX_DB)"},
		{"broker", []string{"TXBOX_FAIL_FAST=true"}, append([]string{"relay", "--broker", "nats://" + dead}, flags...), "--broker (TXBOX_BROKER)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, code := runFor(t, 20*time.Second, c.env, c.args...)
			took := time.Since(start)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(out, c.names) || !strings.Contains(out, "--fail-fast") || took > 10*time.Second {
				t.Fatalf("txbox %v (env %v): exit %d after %v, want 1 at once and one line naming %s and --fail-fast:\n%s", c.args, c.env, code, took.Round(time.Millisecond), c.names, out)
			}
			assertRedacted(t, "txbox relay --fail-fast", out)
		})
	}
	// The default waits.
	cmd := exec.Command(testenv.Binary(t), append([]string{"relay", "--broker", "nats://" + dead}, db...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, exited := testenv.StartLogged(t, cmd)
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	select {
	case <-exited:
		t.Fatalf("without --fail-fast the relay exited instead of waiting:\n%s", out.String())
	case <-time.After(2 * time.Second):
	}
}

// startupTables migrates fresh tables (and, for CDC, the publication and a
// slot, dropped at the end, on a database with logical decoding) and
// returns the relay's flags for them, without the broker's.
func startupTables(t *testing.T, mode string) (args []string, conn *pgx.Conn, outbox string) {
	t.Helper()
	tables := cliTables
	if mode == "cdc" {
		tables = cdcTables
	}
	_, flags, conn, outbox := tables(t)
	args = append([]string{"relay", "--mode", mode,
		"--backoff-base", "100ms", "--outage-probe-max", "500ms", "--metrics-interval", "100ms",
		"--publish-timeout", "1s", "--lease", "4s"}, flags...)
	if mode != "cdc" {
		return args, conn, outbox
	}
	slot := cdcSlot(t, conn, outbox)
	if out, code := run(t, nil, append([]string{"migrate", "--cdc", "--slot", slot}, flags...)...); code != 0 {
		t.Fatalf("migrate --cdc: exit %d\n%s", code, out)
	}
	return append(args, "--slot", slot), conn, outbox
}

func insertEvent(t *testing.T, conn *pgx.Conn, outbox string) string {
	t.Helper()
	id := txbox.NewID()
	if _, err := conn.Exec(context.Background(), `INSERT INTO `+outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES ($1, 'Order', 'o-1', 'Created', '{}')`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// flagValue returns the value of flag in args ("" if absent).
func flagValue(args []string, flag string) string {
	for i := range args {
		if args[i] == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// replaceFlag returns args with the value of flag set to v.
func replaceFlag(args []string, flag, v string) []string {
	out := slices.Clone(args)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = v
		}
	}
	return out
}

func waitStored(t *testing.T, dest *scenario.Destination, id string) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "the event in the stream", func() bool {
		return slices.ContainsFunc(dest.Stored(t), func(s scenario.Seen) bool { return s.EventID == id })
	})
}

func checkMetricsText(t *testing.T, promtool string, text []byte) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out, text)
	}
}

// relayProcess is a `txbox relay` of the test's own, serving its metrics on
// a free port.
type relayProcess struct {
	cmd    *exec.Cmd
	logs   *testenv.SyncBuffer
	exited <-chan struct{}
	base   string
}

func startRelayProcess(t *testing.T, env []string, args ...string) *relayProcess {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	p := &relayProcess{base: "http://" + addr}
	p.cmd = exec.Command(testenv.Binary(t), append(args, "--metrics-addr", addr)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.logs, p.exited = testenv.StartLogged(t, p.cmd)
	t.Cleanup(func() {
		testenv.StopProcess(p.cmd.Process, os.Interrupt, p.exited, 10*time.Second)
		if t.Failed() {
			t.Logf("relay log:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("the relay exited before serving its metrics:\n%s", p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not serve its metrics within 20s:\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustRun fails the test if the relay has exited.
func (p *relayProcess) mustRun(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("the relay exited instead of waiting:\n%s", p.logs.String())
	default:
	}
}

// waitReadyAndDelivered waits, from the metrics alone, for the relay to be
// ready with its database and broker up and n events delivered; then
// /readyz must agree.
func (p *relayProcess) waitReadyAndDelivered(t *testing.T, n float64) {
	t.Helper()
	var last scrape
	testenv.WaitFor(t, 30*time.Second, "ready, database and broker up, the event delivered", func() bool {
		p.mustRun(t)
		last, _ = scrapeURL(t, p.base+"/metrics")
		return last.value("txbox_relay_ready") == 1 && last.value("txbox_relay_broker_up") == 1 && last.value("txbox_relay_database_up") == 1 &&
			last.value("txbox_relay_published_total", "outcome", "delivered") == n
	})
	if code, body := probe(p.base + "/readyz"); code != 200 {
		t.Fatalf("/readyz after the start: %d %q", code, body)
	}
}

// runFor runs the binary like run, but fails the test if it is still
// running after d.
func runFor(t *testing.T, d time.Duration, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("txbox %v still running after %v:\n%s", args, d, out)
	}
	return string(out), exitCode(t, err)
}

// forwarder is a database that becomes reachable at a port the relay was
// given while nothing listened there: a TCP forwarder to the real server,
// started later on a port reserved now.
type forwarder struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	stopped      bool
}

func newForwarder(t *testing.T, target string) *forwarder {
	f := &forwarder{addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), target: target}
	t.Cleanup(f.stop)
	return f
}

// stop closes the port and every connection through it.
func (f *forwarder) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.ln != nil {
		f.ln.Close()
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *forwarder) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			if f.stopped {
				f.mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}
