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
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

var (
	duration = flag.Duration("faults.duration", 90*time.Second, "how long producers write while faults are injected (long mode: 30m); also the length of TestFaultsMariaDB and TestFaultsKafka when given")
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

// runOpts is one harness run.
type runOpts struct {
	relayBin, consumerBin string
	world                 string // postgres-nats (default), postgres-nats-shared, mariadb-nats, postgres-kafka
	duration              time.Duration
	scale                 int
	quiesce               time.Duration // longest wait for every event to be applied
	settle                time.Duration // 0, or: stop waiting once nothing was applied for this long
	seed                  uint64
	cdc                   bool // relays in --mode cdc
	// failedFaults are the schedule's lines of faults that did not happen,
	// for the summary a failed run ends with (summarize).
	failedFaults *[]string
	// long are the long outages, run within duration (none: a sabotage
	// run, too short for them); defaultRetry gives the relays the default
	// retry schedule.
	long         Long
	defaultRetry bool
	// catchUp bounds the stream-recreated fault's wait for the consumers
	// (NATS worlds); 0: NATS's default, 5 minutes.
	catchUp time.Duration
}

func newWorld(t *testing.T, o runOpts) *World {
	relayBin := o.relayBin
	switch o.world {
	case "", "postgres-nats":
		w := NewWorld(t, relayBin)
		w.Postgres().GapIDs = *gapIDs
		if o.cdc {
			w.Postgres().EnableCDC(w)
		}
		return w
	case "mariadb-nats":
		db := NewMariaDB(t)
		db.GapIDs = *gapIDs
		return NewWorldOn(t, relayBin, db, NewNATS(t))
	case "postgres-nats-shared":
		// On the shared server: no PostgreSQL restart.
		db := NewPostgres(t, false)
		db.GapIDs = *gapIDs
		return NewWorldOn(t, relayBin, db, NewNATS(t))
	case "postgres-kafka":
		db := NewPostgres(t, true)
		db.GapIDs = *gapIDs
		return NewWorldOn(t, relayBin, db, NewKafka(t))
	}
	t.Fatalf("no world %q", o.world)
	return nil
}

// harness runs the world's processes, producers and faults; it returns the
// checker's report and the faults it injected.
func harness(t *testing.T, o runOpts) (Report, map[Kind]int, Minimums) {
	w := newWorld(t, o)
	if o.consumerBin != "" {
		w.self = o.consumerBin
	}
	if n, ok := w.Broker.(*NATS); ok && o.catchUp > 0 {
		n.CatchUp = o.catchUp
	}
	w.RetryArgs = relayRetry(o.defaultRetry)
	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range Consumers {
		w.StartConsumer(i)
	}
	ctx := context.Background()
	pctx, stopProducers := context.WithTimeout(ctx, o.duration)
	defer stopProducers()
	prod := Produce(pctx, w, 4, *rate, o.seed, 0.1)
	min := w.Minimums()
	injected := make(chan map[Kind]int, 1)
	sched := WithLong(o.seed, Schedule(o.seed, o.duration-o.long.Total(), min, o.scale), o.long)
	go func() { injected <- Inject(ctx, w, sched, o.faultLog(t)) }()
	done := <-injected
	prod.Wait()
	// Bring back anything a fault left down, then let the flow drain.
	w.Broker.Start()
	w.DB.Proxy().Restore()
	w.Broker.Proxy().Restore()
	w.Skew.Store(false)
	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range Consumers {
		w.StartConsumer(i)
	}
	rep := drainAndCheck(t, w, prod, o.quiesce, o.settle)
	prod.mu.Lock()
	t.Logf("producers: %d committed, %d rolled back on purpose, %d errors", prod.Committed, len(prod.RolledBack), prod.Errors)
	prod.mu.Unlock()
	return rep, done, min
}

// drained reports whether every consumer applied every committed event.
func drained(ctx context.Context, w *World) bool {
	committed, applied, err := w.DB.Progress(ctx)
	return err == nil && allApplied(committed, applied)
}

func allApplied(committed int, applied map[string]int) bool {
	if committed == 0 {
		return false
	}
	for _, c := range consumerNames() {
		if applied[c.Inbox] < committed {
			return false
		}
	}
	return true
}

// drainAndCheck waits up to quiesce for every event of the ledger to be
// applied by every consumer (with settle, only while events are still
// being applied: a broken build may never apply them all), then past the
// ack wait (late redeliveries must be absorbed too), and runs the checker.
// quiesce is stretched while the consumers keep applying, up to three
// times: on a loaded machine a fixed wait measures the machine, and a
// consumer that stopped still fails at quiesce (or after settle).
func drainAndCheck(t *testing.T, w *World, prod *Production, quiesce, settle time.Duration) Report {
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(quiesce)
	last, lastChange := -1, time.Now()
	for time.Now().Before(deadline) {
		committed, applied, err := w.DB.Progress(ctx)
		total := 0
		if err == nil {
			for _, c := range consumerNames() {
				total += applied[c.Inbox]
			}
			if allApplied(committed, applied) {
				break
			}
		}
		if total != last {
			last, lastChange = total, time.Now()
			if time.Until(deadline) < time.Minute {
				deadline = time.Now().Add(time.Minute)
				if limit := start.Add(3 * quiesce); deadline.After(limit) {
					deadline = limit
				}
			}
		} else if settle > 0 && time.Since(lastChange) > settle {
			t.Logf("nothing applied for %v: checking (%d committed, applied %v)", settle, committed, applied)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if waited := time.Since(start); waited > quiesce {
		t.Logf("the consumers were still applying at %v: waited %v", quiesce, waited.Round(time.Second))
	}
	if !drained(ctx, w) {
		// Where the consumers wait goes into their output, which a failed
		// run's log shows (World's cleanup): slow, or stuck, and where.
		t.Logf("not every event applied after %v: the consumers' goroutines follow in their output", time.Since(start).Round(time.Second))
		for _, c := range consumerNames() {
			w.dumpConsumers(c.Inbox)
		}
	}
	time.Sleep(4 * time.Second)
	// The consumers stop before the checker reads: it reads the effects and
	// then, to explain what is missing, the inbox rows, and a consumer still
	// applying in between would show an inbox row without its effect.
	for _, c := range Consumers {
		w.Kill(c.Proc)
	}
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

// TestFaults is the harness on PostgreSQL and NATS: nothing lost, nothing
// applied twice, no reorder, under every kind of fault, at least the short
// mode's minimums. -faults.mode picks the relays' mode (poll by default).
//
// Every world runs t.Parallel, in the test binary's -parallel slots (two
// on CI's two cores): one after the other the package came near its
// 25-minute timeout on a loaded machine. (Four at a time, beside two CPU
// hogs, every world was still applying when its drain wait ended:
// RELIABILITY.md.)
func TestFaults(t *testing.T) {
	t.Parallel()
	runFaults(t, runOpts{cdc: *mode == "cdc", duration: *duration})
}

// TestFaultsCDC is the harness with both relays in --mode cdc on one
// replication slot, so that CI proves CDC delivery under every fault kind
// too; its length is the short mode's (long CDC runs: TestFaults with
// -faults.mode cdc).
func TestFaultsCDC(t *testing.T) {
	if *mode == "cdc" {
		t.Skip("-faults.mode cdc: TestFaults runs the harness in cdc mode already")
	}
	t.Parallel()
	runFaults(t, runOpts{cdc: true, duration: 90 * time.Second})
}

// TestFaultsMariaDB is the harness on MariaDB (the MySQL store, every relay
// claiming by lease) and NATS. In CI it runs 45 s of faults and the long
// outages; -faults.duration sets its length (long runs).
func TestFaultsMariaDB(t *testing.T) {
	t.Parallel()
	runFaults(t, runOpts{world: "mariadb-nats", duration: secondWorldDuration()})
}

// TestFaultsKafka is the harness on PostgreSQL and Kafka (kfake, in this
// process, behind a proxy the cluster advertises). As TestFaultsMariaDB.
func TestFaultsKafka(t *testing.T) {
	t.Parallel()
	runFaults(t, runOpts{world: "postgres-kafka", duration: secondWorldDuration()})
}

func secondWorldDuration() time.Duration {
	d := 45 * time.Second
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "faults.duration" {
			d = *duration
		}
	})
	return d
}

// faultLog is the schedule's log: t's, also keeping the lines of faults
// that did not happen when o collects them.
func (o runOpts) faultLog(t *testing.T) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		t.Helper()
		line := fmt.Sprintf(format, args...)
		if o.failedFaults != nil && strings.Contains(line, " FAILED: ") {
			mu.Lock()
			*o.failedFaults = append(*o.failedFaults, strings.TrimSpace(line))
			mu.Unlock()
		}
		t.Log(line)
	}
}

// summarize repeats, when t failed, why, after everything else t logs:
// the processes' output (World's cleanup) follows the failure otherwise,
// and a CI log that keeps only the end would not show it. It is registered
// before the world, so that it runs after the world's cleanup.
func summarize(t *testing.T, why *[]string) {
	t.Cleanup(func() {
		if t.Failed() && len(*why) > 0 {
			t.Logf("%s FAILED (repeated after the processes' output):\n  %s", t.Name(), strings.Join(*why, "\n  "))
		}
	})
}

func runFaults(t *testing.T, o runOpts) {
	var why []string
	summarize(t, &why)
	o.failedFaults = &why
	o.seed = seed()
	if o.world == "" {
		o.world = "postgres-nats"
	}
	o.long, o.defaultRetry = LongFor(*defaultRetry, *longOutage), *defaultRetry
	if o.duration < o.long.Total()+time.Minute {
		// The ordinary faults keep at least a minute besides the long ones
		// (CI's short runs get their long outages on top).
		o.duration += o.long.Total()
	}
	replay := fmt.Sprintf("-run 'TestFaults$' -args -faults.seed %d -faults.duration %v", o.seed, o.duration)
	switch {
	case o.cdc:
		replay += " -faults.mode cdc"
	case o.world != "postgres-nats":
		replay = fmt.Sprintf("-run '%s$' -args -faults.seed %d -faults.duration %v", t.Name(), o.seed, o.duration)
	}
	replay += fmt.Sprintf(" -faults.long-outage %v -faults.default-retry=%v", *longOutage, *defaultRetry)
	t.Logf("world %s, seed %d (replay: go test ./faults %s)", o.world, o.seed, replay)
	o.relayBin = testenv.Binary(t)
	o.scale = max(1, int((o.duration-o.long.Total())/(90*time.Second)))
	// The backlog a long outage leaves takes its time to drain: the wait
	// for it grows with the outage (it ends as soon as all is applied).
	o.quiesce = max(3*time.Minute, o.long[LongBrokerOutage])
	rep, done, min := harness(t, o)
	t.Logf("faults injected: %v", done)
	t.Logf("report:\n%s", rep)
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		why = append(why, msg)
		t.Error(msg)
	}
	for k, n := range min {
		if done[k] < n {
			fail("only %d of %d %s faults were injected", done[k], n, k)
		}
	}
	for k := range o.long {
		if done[k] != 1 {
			fail("%d %s faults were injected, want 1", done[k], k)
		}
	}
	if f := rep.Failed(); len(f) > 0 {
		fail("VIOLATIONS: %s (seed %d)", strings.Join(f, ", "), o.seed)
		t.FailNow()
	}
	if rep.Committed < 1000 {
		fail("only %d events committed: the run proved too little", rep.Committed)
		t.FailNow()
	}
}

// TestSabotagedBuildsAreCaught builds the deliberately broken variants and
// shows that the checker catches each by the signal that belongs to it,
// while an unbroken build, run at the same settings (duration, seed, so
// the same faults at the same times, the same wait for the flow to drain),
// shows none of these signals.
//
// It runs beside the other worlds (t.Parallel), its five runs three at a
// time: they are subtests run from goroutines of its own, which the
// -parallel limit does not count, so that the test takes one slot. The runs are on the shared
// PostgreSQL server, so without the PostgreSQL restart.
func TestSabotagedBuildsAreCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Parallel()
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
	shipped := testenv.Binary(t)
	s := seed()
	t.Logf("seed %d (replay: go test ./faults -run TestSabotagedBuildsAreCaught -args -faults.seed %d)", s, s)
	// Three runs at a time, within the shared server's connections (a run
	// holds about 30).
	slots := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for _, c := range []struct {
		name, relay, consumer string
		signal                int // index in signals; -1: the unbroken build, which must show none
	}{
		{"Unbroken", shipped, "", -1},
		{"RelayMarksSentBeforeAck", relay("mark_first"), "", 0},
		{"InboxAcksBeforeCommit", shipped, consumer("ack_first"), 1},
		{"InboxSkipsItsRecord", shipped, consumer("no_inbox"), 2},
		{"RelayBreaksAggregateRun", relay("overtake"), "", 3},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.name, func(t *testing.T) {
				slots <- struct{}{}
				defer func() { <-slots }()
				sabotageRun(t, c.relay, c.consumer, c.signal, s)
			})
		}()
	}
	wg.Wait()
}

// signals are the checker's figures that each belong to one broken
// guarantee (Report).
var signals = []struct {
	name  string
	count func(Report) int
}{
	{"SENT but never in the stream", func(r Report) int { return r.SentNotInStream }},
	{"in the stream, never applied", func(r Report) int { return r.UnappliedInStream }},
	{"double effects", func(r Report) int { return r.DoubleEffects }},
	{"order violations in the stream", func(r Report) int { return r.PublishReorders }},
}

// sabotageRun is one run of TestSabotagedBuildsAreCaught: the build of
// relay and consumer must show signals[signal], or, for -1, none of them
// and no violation at all.
func sabotageRun(t *testing.T, relay, consumer string, signal int, seed uint64) {
	rep, _, _ := harness(t, runOpts{world: "postgres-nats-shared", relayBin: relay, consumerBin: consumer,
		duration: 30 * time.Second, scale: 1, quiesce: 2 * time.Minute, settle: 20 * time.Second, seed: seed,
		// A build that loses or reorders events may leave the Ordered
		// consumers waiting for ever for a predecessor: the fault is not
		// what such a run proves, and five minutes of waiting for it cost
		// the package its timeout on a loaded machine.
		catchUp: 30 * time.Second})
	t.Logf("report:\n%s", rep)
	var figures []string
	for _, sig := range signals {
		figures = append(figures, fmt.Sprintf("%s %d", sig.name, sig.count(rep)))
	}
	t.Logf("signals: %s", strings.Join(figures, ", "))
	if signal < 0 {
		for _, sig := range signals {
			if n := sig.count(rep); n != 0 {
				t.Errorf("the unbroken build shows %s %d (seed %d)", sig.name, n, seed)
			}
		}
		if f := rep.Failed(); len(f) > 0 {
			t.Errorf("the unbroken build: %s (seed %d)", strings.Join(f, ", "), seed)
		}
		if rep.Committed < 1000 {
			t.Errorf("only %d events committed: the control proves too little", rep.Committed)
		}
		return
	}
	for _, cr := range rep.Consumers {
		if cr.Applied == 0 {
			t.Fatalf("nothing was applied by %s: the run shows nothing (seed %d)", cr.Name, seed)
		}
	}
	sig := signals[signal]
	if n := sig.count(rep); n == 0 {
		t.Fatalf("the checker did not report %s for the broken build (seed %d); it reported: %v", sig.name, seed, rep.Failed())
	}
	t.Logf("caught: %s %d; all: %s", sig.name, sig.count(rep), strings.Join(rep.Failed(), ", "))
}

func moduleRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
