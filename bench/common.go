package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

const (
	defaultPG   = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultNATS = "nats://127.0.0.1:4222"
)

// benchEnv is one measurement's world: a fresh suffix for every table and
// stream it makes, a pgx pool, a NATS connection and a fresh JetStream
// stream over <prefix>.>. close drops everything it made.
type benchEnv struct {
	pg      string
	natsU   string
	sfx     string // 8 hex characters, unique per env
	tables  store.Tables
	stream  string
	prefix  string
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	nc      *nats.Conn
	extra   []string  // further tables to drop
	wmTopic string    // drain: the watermill-sql topic holding the backlog
	slot    string    // drain txbox-cdc: the replication slot
	kafka   *kafkaEnv // skew --kafka: the relays publish here instead
}

// newEnv connects and makes, with txboxTables, the txbox outbox and inbox
// tables (the library's own migrations) and, unless natsURL is empty, the
// stream.
func newEnv(ctx context.Context, pg, natsURL string, txboxTables bool) (*benchEnv, error) {
	e := &benchEnv{pg: pg, natsU: natsURL}
	e.sfx = strings.ReplaceAll(txbox.NewID()[24:], "-", "")[:8]
	e.tables = store.Tables{Outbox: "bench_ob_" + e.sfx, Inbox: "bench_ib_" + e.sfx}
	e.prefix = "bench" + e.sfx
	e.stream = strings.ToUpper(e.prefix)
	var err error
	if e.pool, err = pgxpool.New(ctx, pg); err != nil {
		return nil, err
	}
	if txboxTables {
		s, err := postgres.New(e.pool, postgres.Options{Tables: e.tables, Logger: quiet()})
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err != nil {
			e.close()
			return nil, err
		}
	}
	if kafkaAddr != "" && txboxTables {
		if e.kafka, err = newKafkaEnv(ctx, e.prefix); err != nil {
			e.close()
			return nil, err
		}
		return e, nil
	}
	if natsURL == "" {
		return e, nil
	}
	if e.nc, err = nats.Connect(natsURL); err != nil {
		e.close()
		return nil, err
	}
	e.js, _ = jetstream.New(e.nc)
	cfg := jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.prefix + ".>"}, Storage: jetstream.FileStorage}
	cfg.AllowBatchPublish, cfg.AllowAtomicPublish = streamBatchFlags(e.nc.ConnectedServerVersion())
	if _, err := e.js.CreateStream(ctx, cfg); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// table names a fresh table of this env and drops it on close.
func (e *benchEnv) table(kind string) string {
	t := "bench_" + kind + "_" + e.sfx
	e.extra = append(e.extra, t)
	return t
}

func (e *benchEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.nc != nil {
		_ = e.js.DeleteStream(ctx, e.stream)
		e.nc.Close()
	}
	if e.kafka != nil {
		e.kafka.close(ctx)
	}
	drop := []string{e.tables.Outbox, e.tables.Outbox + "_sent", e.tables.Outbox + "_migrations", e.tables.Inbox, e.tables.Inbox + "_versions"}
	for _, t := range append(drop, e.extra...) {
		if !strings.HasPrefix(t, `"`) {
			t = `"` + t + `"`
		}
		_, _ = e.pool.Exec(ctx, "DROP TABLE IF EXISTS "+t)
	}
	e.pool.Close()
}

// relayArgs are the `txbox relay` arguments that point a relay at this env.
func (e *benchEnv) relayArgs() []string {
	if e.kafka != nil {
		return kafkaRelayArgs(e.natsRelayArgs(), e.kafka.topic)
	}
	return e.natsRelayArgs()
}

func (e *benchEnv) natsRelayArgs() []string {
	return []string{"relay", "--db", e.pg, "--outbox-table", e.tables.Outbox, "--inbox-table", e.tables.Inbox,
		"--broker", e.natsU, "--nats-stream", e.stream, "--topic", e.prefix + ".{aggregate_type}.{event_type}",
		"--log-level", relayLogLevel}
}

// relayLogLevel is the --log-level of relay child processes; drain's
// --relay-log info shows each relay's time per phase when it stops.
var relayLogLevel = "error"

func (e *benchEnv) storedMsgs(ctx context.Context) uint64 {
	if e.kafka != nil {
		return e.kafka.stored(ctx)
	}
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.Msgs
}

// waitStream polls the stream until it holds want messages. It fails when
// timeout passes, when the count has not moved for stall, or when one of
// procs exits.
func (e *benchEnv) waitStream(ctx context.Context, want int, timeout, stall time.Duration, procs ...*child) (time.Duration, error) {
	start := time.Now()
	last, lastMove := uint64(0), start
	for {
		n := e.storedMsgs(ctx)
		if int(n) >= want {
			return time.Since(start), nil
		}
		if n != last {
			last, lastMove = n, time.Now()
		}
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return 0, fmt.Errorf("%s exited with %d of %d in the stream: %w", p.name, n, want, err)
			}
		}
		switch {
		case time.Since(start) > timeout:
			return 0, &timedOut{after: time.Since(start), n: int(n), want: want}
		case time.Since(lastMove) > stall:
			return 0, fmt.Errorf("stalled for %v: %d of %d in the stream", stall, n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// timedOut is waitStream's error when the drain passed its timeout: how far
// it got, so that a capped run (wmsweep --cap) can report its rate so far.
type timedOut struct {
	after   time.Duration
	n, want int
}

func (t *timedOut) Error() string {
	return fmt.Sprintf("timed out after %v: %d of %d in the stream", t.after.Round(time.Second), t.n, t.want)
}

// child is a process the bench started: a relay or a forwarder.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// startChild starts bin with args, its stderr on ours. The child gets
// SIGKILL if the bench dies, so an interrupted run leaves no relay behind.
func startChild(name, bin string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.Stderr = os.Stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := c.cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		c.err = err
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports the exit error once the child has ended, nil while it runs.
func (c *child) exited() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// stats reads /proc for the running child.
func (c *child) stats() procStats { return readProc(c.pid()) }

// stop interrupts the child and waits for it, killing it after 10 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// procStats is what /proc says of a process.
type procStats struct {
	peakRSSKB int64
	cpu       time.Duration // user + system, all threads
}

func readProc(pid int) procStats {
	var ps procStats
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				f := strings.Fields(l)
				ps.peakRSSKB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ps.cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	return ps
}

// cpuPercent is CPU time used over wall time, as % of one core.
func cpuPercent(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return 100 * cpu.Seconds() / wall.Seconds()
}

var txboxBin struct {
	once sync.Once
	path string
	err  error
}

// txboxBinary builds cmd/txbox of the enclosing module, once per process.
func txboxBinary() (string, error) {
	txboxBin.once.Do(func() {
		// A prebuilt binary, for A/B runs of two versions of the relay.
		if p := os.Getenv("TXBOX_BENCH_BIN"); p != "" {
			txboxBin.path = p
			return
		}
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			txboxBin.err = err
			return
		}
		root := filepath.Dir(filepath.Dir(strings.TrimSpace(string(gomod))))
		// One binary per checkout: benches of two worktrees on one machine
		// must not run each other's relay (a shared path is rebuilt by
		// whichever bench started last).
		p := filepath.Join(os.TempDir(), fmt.Sprintf("txbox-bench-bin-%08x", crc32.ChecksumIEEE([]byte(root))))
		// Built in the library's own module, with its own go.mod: what users run.
		cmd := exec.Command("go", "build", "-o", p, "./cmd/txbox")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			txboxBin.err = fmt.Errorf("build txbox: %v\n%s", err, out)
			return
		}
		txboxBin.path = p
	})
	return txboxBin.path, txboxBin.err
}

// benchPayload is the ~300-byte JSON document every subcommand sends, the
// same shape as the SQL-generated backlogs.
type benchPayload struct {
	Seq      int    `json:"seq"`
	Customer string `json:"customer"`
	Note     string `json:"note"`
}

var note240 = strings.Repeat("x", 240)

func payloadFor(i int) benchPayload {
	return benchPayload{Seq: i, Customer: "c-" + strconv.Itoa(i%997), Note: note240}
}

// percentile of sorted xs, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func medianOf[T any](rs []T, f func(T) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// contenderList parses --only against the known names, keeping the order
// given.
func contenderList(only string, known []string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown contender %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("--only names no contender")
	}
	return out, nil
}

// ratio formats a/b, or "-" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
