// Package faults is the fault-injection harness and its checker: producers
// write orders and events in transactions, three relay processes (two in CDC mode) and three
// consumer processes deliver and apply them, and a seeded schedule kills
// processes, restarts the broker, ends database sessions, cuts,
// slows and half-opens connections, and does what is not kind to the data
// (harder.go, mariadb.go): skewed keys, operators truncating and editing the outbox,
// lease clock jumps, read-only databases, a full stream. The producers
// record what they committed in a ledger of their own; the checker compares
// it with the stream and the consumers' database and reports what was lost,
// phantom, applied twice or applied out of order, and for each broken
// guarantee the signal that belongs to it.
//
// A world is a database server and a broker: PostgreSQL and NATS
// JetStream (TestFaults, TestFaultsCDC), MariaDB and NATS
// (TestFaultsMariaDB), PostgreSQL and Kafka (TestFaultsKafka).
//
// Run the short mode with `go test ./faults`; the long mode with
// `go test ./faults -run TestFaults -timeout 60m -args -faults.duration 30m`.
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// World is everything one harness run owns: a database server with two
// fresh databases, a broker, proxies in front of both, and the processes.
type World struct {
	t      *testing.T
	DB     Database
	Broker Broker

	mu    sync.Mutex
	procs map[string]*proc
	relay string // txbox binary
	self  string // this test binary, re-run as a consumer

	// RetryArgs are the relays' retry flags (relayRetry).
	RetryArgs []string

	// Skew, while set, sends 90% of the producers' events to three hot
	// aggregates (the skewed-keys fault).
	Skew atomic.Bool
}

// topic is the relays' destination template: every event of the harness
// is an Order's OrderChanged, so one subject (NATS) or topic (Kafka).
const topic = "faults.{aggregate_type}.{event_type}"

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	args []string
	env  []string
	bin  string
	out  *strings.Builder
	// shown: its output was logged.
	shown bool
}

// NewWorld is the PostgreSQL and NATS world; it is torn down when t ends.
// relayBin is the txbox binary to run as relays (a sabotaged build in the
// broken tests).
func NewWorld(t *testing.T, relayBin string) *World {
	return NewWorldOn(t, relayBin, NewPostgres(t, true), NewNATS(t))
}

// NewWorldOn is the world of db and b (made for t, so torn down after the
// processes, which stop first).
func NewWorldOn(t *testing.T, relayBin string, db Database, b Broker) *World {
	t.Helper()
	w := &World{t: t, DB: db, Broker: b, procs: map[string]*proc{}, relay: relayBin, self: os.Args[0], RetryArgs: relayRetry(false)}
	if n, ok := b.(*NATS); ok {
		n.stuck = w.dumpConsumers
	}
	t.Cleanup(w.stopAll)
	return w
}

// Postgres is the world's database when it is PostgreSQL, else nil.
func (w *World) Postgres() *Postgres {
	pg, _ := w.DB.(*Postgres)
	return pg
}

// Minimums are the fault kinds of this world and how many a short run
// injects at least: the processes', the proxies' and the keys', the
// database's and the broker's.
func (w *World) Minimums() Minimums {
	m := Minimums{KillRelay: 5, KillConsumer: 2, CutNetwork: 1, SlowNetwork: 1, HalfOpen: 1, SkewedKeys: 1}
	for _, o := range []Minimums{w.DB.Minimums(), w.Broker.Minimums()} {
		for k, n := range o {
			m[k] = n
		}
	}
	return m
}

// Relays is how many relay processes the world runs: in polling mode
// three, in CDC mode two on one slot (one reads, one is standby).
func (w *World) Relays() int {
	if pg := w.Postgres(); pg != nil && pg.Slot != "" {
		return 2
	}
	return 3
}

// StartRelay starts (or restarts) relay i. On PostgreSQL relays 0 and 2
// hold their claims with the claim's transaction (the default), so they
// split the aggregates between them (claimapi.Splitter) and a kill hands one's
// share to the other; relay 1 writes leases into the rows (--claims lease,
// as behind PgBouncer's statement pooling), so the two kinds of claims run
// against each other and the lease clock-jump fault has leases to move. On
// MariaDB all three claim by lease.
func (w *World) StartRelay(i int) {
	name := fmt.Sprintf("relay-%d", i)
	args := append([]string{"relay", "--db", w.DB.RelayURL(), "--broker", w.Broker.URL()}, w.Broker.RelayArgs()...)
	args = append(args, "--topic", topic,
		"--relay-id", name, "--batch-size", "200", "--lease", "3s", "--publish-timeout", "1s", "--poll-interval", "20ms",
		"--log-level", "warn")
	args = append(append(args, w.RetryArgs...), w.DB.RelayArgs(i)...)
	w.start(name, w.relay, args, nil)
}

// StartConsumer starts (or restarts) consumer i of Consumers: this test
// binary in consumer mode (see TestMain).
func (w *World) StartConsumer(i int) {
	c := Consumers[i]
	env := append([]string{"TXBOX_FAULTS_CONSUMER=1", "FAULTS_NAME=" + c.Proc, "FAULTS_INBOX=" + c.Inbox,
		"FAULTS_DB_KIND=" + w.DB.Kind(), "FAULTS_DB=" + w.DB.ConsumerURL(), "FAULTS_AUDIT_DB=" + w.DB.AuditURL(),
		"FAULTS_BROKER_KIND=" + w.Broker.Kind(), "FAULTS_BROKER=" + w.Broker.URL()}, w.Broker.ConsumerEnv()...)
	if c.Ordered {
		env = append(env, "FAULTS_ORDERED=1")
	}
	w.start(c.Proc, w.self, []string{"-test.run=^$"}, env)
}

func (w *World) start(name, bin string, args, env []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.procs[name]; ok {
		select {
		case <-p.done:
		default:
			return // running
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &strings.Builder{}
	lw := &lockedWriter{b: out}
	cmd.Stdout, cmd.Stderr = lw, lw
	if dir := os.Getenv("FAULTS_LOGDIR"); dir != "" {
		// Whole outputs, for a run being debugged (the report shows only
		// the last lines of each process).
		// One file per test and process: the worlds of a package run side
		// by side, and their processes share names.
		file := strings.NewReplacer("/", "_", " ", "_").Replace(w.t.Name()) + "-" + name + ".log"
		if f, err := os.OpenFile(filepath.Join(dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			lw.file = f
		}
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), args: args, env: env, bin: bin, out: out}
	go func() {
		_ = cmd.Wait()
		lw.close()
		close(p.done)
	}()
	w.procs[name] = p
}

// Kill SIGKILLs a process and waits for it to be gone.
func (w *World) Kill(name string) {
	w.mu.Lock()
	p := w.procs[name]
	w.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// dumpConsumers makes the consumer processes of inbox name write their
// goroutines to their output (faults/consumer.go, dumpOnSignal), and gives
// them a moment to.
func (w *World) dumpConsumers(name string) {
	for _, c := range Consumers {
		if c.Inbox == name {
			w.Signal(c.Proc, syscall.SIGUSR1)
		}
	}
	time.Sleep(time.Second)
}

// Signal sends sig to a process, if it runs.
func (w *World) Signal(name string, sig os.Signal) {
	w.mu.Lock()
	p := w.procs[name]
	w.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Running reports whether a process is alive.
func (w *World) Running(name string) bool {
	w.mu.Lock()
	p := w.procs[name]
	w.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (w *World) stopAll() {
	w.mu.Lock()
	names := make([]string, 0, len(w.procs))
	for n := range w.procs {
		names = append(names, n)
	}
	w.mu.Unlock()
	for _, n := range names {
		w.mu.Lock()
		p := w.procs[n]
		w.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if w.t.Failed() && !p.shown {
			p.shown = true // stopAll runs again after a CDC world's slot is dropped
			w.t.Logf("output of %s (last 2000 bytes):\n%s", n, tailString(p.out.String(), 2000))
		}
	}
}

type lockedWriter struct {
	mu   sync.Mutex
	b    *strings.Builder
	file *os.File // FAULTS_LOGDIR: everything, unbounded
}

// close closes the FAULTS_LOGDIR file, if any, once the process is gone.
func (l *lockedWriter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_, _ = l.file.Write(p)
	}
	if l.b.Len() > 1<<20 {
		return len(p), nil // bounded: a chatty process cannot eat memory
	}
	return l.b.Write(p)
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
