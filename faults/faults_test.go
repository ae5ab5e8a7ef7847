package faults

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

var (
	duration = flag.Duration("faults.duration", 90*time.Second, "how long producers write while faults are injected (long mode: 30m)")
	seedFlag = flag.Uint64("faults.seed", 0, "seed of the fault schedule and the producers (0: from the clock)")
	rate     = flag.Float64("faults.rate", 200, "events per second written by the producers")
	mode     = flag.String("faults.mode", "poll", "relay mode: poll (one relay with transaction claims, one with leases) or cdc (both on one replication slot: one reads, one is standby)")
	gapIDs   = flag.Bool("faults.gap-ids", true, "the explicit-ids fault writes ids from the sequence's gaps, usually below the PostgreSQL claim floor (false: ids taken from the sequence by hand)")
	// The long outages (outages.go) are part of -faults.duration.
	longOutage   = flag.Duration("faults.long-outage", 10*time.Second, "how long the broker is down in the long broker outage (long mode: 15m, with -faults.default-retry)")
	defaultRetry = flag.Bool("faults.default-retry", false, "relays run the default retry schedule (10 attempts, 1s doubling to 300s) instead of 3 attempts within about half a second; the long broker outage must outlast it")
)

// TestMain turns this test binary into a consumer process when the harness
// starts it so.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("TXBOX_FAULTS_CONSUMER") == "1" {
		lvl := slog.LevelWarn
		if os.Getenv("FAULTS_DEBUG") != "" {
			lvl = slog.LevelDebug
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
		if err := RunConsumer(); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	os.Exit(m.Run())
}

// run is one harness run; it returns the checker's report and the faults
// it injected.
type runOpts struct {
	relayBin, consumerBin string
	duration              time.Duration
	scale                 int
	quiesce               time.Duration
	seed                  uint64
	cdc                   bool // relays in --mode cdc
	// long are the long outages, run within duration (none: a sabotage
	// run, too short for them); defaultRetry gives the relays the default
	// retry schedule.
	long         Long
	defaultRetry bool
}

func harness(t *testing.T, o runOpts) (Report, map[Kind]int) {
	w := NewWorld(t, o.relayBin)
	w.GapIDs = *gapIDs
	w.RetryArgs = relayRetry(o.defaultRetry)
	if o.cdc {
		w.EnableCDC()
	}
	if o.consumerBin != "" {
		w.self = o.consumerBin
	}
	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range 2 {
		w.StartConsumer(i)
	}
	ctx := context.Background()
	pctx, stopProducers := context.WithTimeout(ctx, o.duration)
	defer stopProducers()
	prod := Produce(pctx, w, 4, *rate, o.seed, 0.1)
	injected := make(chan map[Kind]int, 1)
	sched := WithLong(o.seed, Schedule(o.seed, o.duration-o.long.Total(), ShortMinimums, o.scale), o.long)
	go func() { injected <- Inject(ctx, w, sched, t.Logf) }()
	done := <-injected
	prod.Wait()
	// Bring back anything a fault left down, then let the flow drain.
	w.NATS.Start()
	w.PGProxy.Restore()
	w.NATProxy.Restore()
	w.Skew.Store(false)
	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range 2 {
		w.StartConsumer(i)
	}
	rep := drainAndCheck(t, w, prod, o.quiesce)
	prod.mu.Lock()
	t.Logf("producers: %d committed, %d rolled back on purpose, %d errors", prod.Committed, len(prod.RolledBack), prod.Errors)
	prod.mu.Unlock()
	return rep, done
}

// drainAndCheck waits up to quiesce for every event of the ledger to be
// applied, then past the ack wait (late redeliveries must be absorbed too),
// and runs the checker.
func drainAndCheck(t *testing.T, w *World, prod *Production, quiesce time.Duration) Report {
	ctx := context.Background()
	deadline := time.Now().Add(quiesce)
	var committed, applied int
	for time.Now().Before(deadline) {
		_ = w.Prod.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&committed)
		_ = w.Cons.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&applied)
		if applied >= committed && committed > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(4 * time.Second)
	rep, err := Check(ctx, w, prod)
	if err != nil {
		t.Fatalf("checker: %v", err)
	}
	return rep
}

func seed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return uint64(time.Now().UnixNano())
}

// TestFaults is the harness: nothing lost, nothing applied twice, no
// reorder, under every kind of fault, at least the short mode's minimums.
// -faults.mode picks the relays' mode (poll by default).
func TestFaults(t *testing.T) {
	runFaults(t, *mode == "cdc", *duration)
}

// TestFaultsCDC is the harness with both relays in --mode cdc on one
// replication slot, so that CI proves CDC delivery under every fault kind
// too; its length is the short mode's (long CDC runs: TestFaults with
// -faults.mode cdc).
func TestFaultsCDC(t *testing.T) {
	if *mode == "cdc" {
		t.Skip("-faults.mode cdc: TestFaults runs the harness in cdc mode already")
	}
	runFaults(t, true, 90*time.Second)
}

func runFaults(t *testing.T, cdc bool, d time.Duration) {
	s := seed()
	m := "poll"
	if cdc {
		m = "cdc"
	}
	long := LongFor(*defaultRetry, *longOutage)
	if d < long.Total()+time.Minute {
		// The ordinary faults keep at least a minute besides the long ones
		// (CI's 90 s runs get their long outages on top).
		d += long.Total()
	}
	t.Logf("seed %d (replay: go test ./faults -run 'TestFaults$' -args -faults.seed %d -faults.duration %v -faults.mode %s -faults.long-outage %v -faults.default-retry=%v)",
		s, s, d, m, *longOutage, *defaultRetry)
	scale := max(1, int((d-long.Total())/(90*time.Second)))
	// The backlog a long outage leaves takes its time to drain: the wait
	// for it grows with the outage (it ends as soon as all is applied).
	quiesce := max(3*time.Minute, long[LongBrokerOutage])
	rep, done := harness(t, runOpts{relayBin: testenv.Binary(t), duration: d, scale: scale, quiesce: quiesce, seed: s, cdc: cdc,
		long: long, defaultRetry: *defaultRetry})
	t.Logf("faults injected: %v", done)
	t.Logf("report:\n%s", rep)
	for k, n := range ShortMinimums {
		if done[k] < n {
			t.Errorf("only %d of %d %s faults were injected", done[k], n, k)
		}
	}
	for k := range long {
		if done[k] != 1 {
			t.Errorf("%d %s faults were injected, want 1", done[k], k)
		}
	}
	if f := rep.Failed(); len(f) > 0 {
		t.Fatalf("VIOLATIONS: %s (seed %d)", strings.Join(f, ", "), s)
	}
	if rep.Committed < 1000 {
		t.Fatalf("only %d events committed: the run proved too little", rep.Committed)
	}
}

// TestSabotagedBuildsAreCaught builds the deliberately broken variants and
// shows the checker reports each with the violation that build causes,
// while events were applied (a harness that applies nothing would report
// "lost" for any build).
func TestSabotagedBuildsAreCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	root := moduleRoot(t)
	build := func(out, pkg string, args ...string) string {
		p := filepath.Join(dir, out)
		cmd := exec.Command("go", append(append([]string{}, args...), "-o", p, pkg)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", out, err, b)
		}
		return p
	}
	relay := func(tag string) string {
		return build("txbox-"+tag, "./cmd/txbox", "build", "-tags", "txbox_sabotage_"+tag)
	}
	consumer := func(tag string) string {
		return build("faults-"+tag+".test", "./faults", "test", "-c", "-tags", "txbox_sabotage_"+tag)
	}
	lost := func(r Report) int { return r.Lost }
	// Two runs at a time: half the wall time, within the server's
	// connections (a run holds about 25).
	slots := make(chan struct{}, 2)
	for _, c := range []struct {
		name, relay, consumer string
		kind                  string
		count                 func(Report) int
	}{
		{"RelayMarksSentBeforeAck", relay("mark_first"), "", "lost", lost},
		{"InboxAcksBeforeCommit", testenv.Binary(t), consumer("ack_first"), "lost", lost},
		{"RelayBreaksAggregateRun", relay("overtake"), "", "order violations in the stream", func(r Report) int { return r.PublishReorders }},
		{"InboxSkipsItsRecord", testenv.Binary(t), consumer("no_inbox"), "double effects", func(r Report) int { return r.DoubleEffects }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			s := seed()
			rep, _ := harness(t, runOpts{relayBin: c.relay, consumerBin: c.consumer, duration: 30 * time.Second, scale: 1, quiesce: 20 * time.Second, seed: s})
			t.Logf("report of the broken build:\n%s", rep)
			if rep.Applied == 0 {
				t.Fatalf("nothing was applied: the run shows nothing about %s (seed %d)", c.name, s)
			}
			if n := c.count(rep); n == 0 {
				t.Fatalf("the checker did not report %s for the broken build %s (seed %d); it reported: %v", c.kind, c.name, s, rep.Failed())
			}
			t.Logf("caught: %s %d (%d applied); all: %s", c.kind, c.count(rep), rep.Applied, strings.Join(rep.Failed(), ", "))
		})
	}
}

func moduleRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
