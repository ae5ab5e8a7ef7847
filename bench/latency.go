package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

// latency answers: how long from COMMIT to a consumer, at a steady rate,
// and what does an idle relay cost? Writers commit one event per
// transaction at a fixed rate; a `txbox relay` process delivers them to a
// fresh stream; a core NATS subscription on the stream's subjects takes the
// receive time. Latency = receive time - the time right after COMMIT
// returned, joined by event id (Nats-Msg-Id) after the run. The relay's CPU
// comes from /proc/<pid>/stat: over --idle seconds with no writes, and from
// the first write until the last event arrived.
//
// Variants: "listen" is `--wakeup listen` at the default poll interval
// with writers using outbox.WithWakeup (NOTIFY at commit); "poll" is
// `--wakeup poll --poll-interval <--poll-interval>` with plain writers;
// "default" is `txbox relay` with no flag of its own (it polls, at
// relay.DefaultPollInterval) and plain writers: a producer writing the table
// contract from its own SQL, with the relay as installed. "watermill" is
// Watermill's forwarder (`bench watermill-forwarder`, PollInterval
// --wm-poll) with writers publishing through forwarder.NewPublisher over a
// watermill-sql publisher bound to their transaction; its arrivals are
// stamped by the same subscription, so the figures compare.

type intList []int

func (l *intList) String() string {
	var s []string
	for _, v := range *l {
		s = append(s, strconv.Itoa(v))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

type strList []string

func (l *strList) String() string     { return strings.Join(*l, " ") }
func (l *strList) Set(v string) error { *l = append(*l, v); return nil }

type latencyResult struct {
	variant, label   string
	rate             int
	events           int
	achieved         float64 // commits per second
	p50, p90, p99    time.Duration
	maxLat           time.Duration
	early            int // received before the writer had read the clock after COMMIT
	idleCPU, loadCPU float64
	dbLoadCPU        float64 // the local PostgreSQL's CPU while writing and delivering, % of one core (-1: not measured)
}

var latencyVariants = []string{"listen", "poll", "default", "watermill", "cdc", "cdc-tableless"}

func latencyCmd(args []string) error {
	fs := newFlags("latency")
	pg, natsURL := fs.services()
	rates := fs.rates("events per second, one per transaction", 500)
	duration := fs.Duration("duration", 20*time.Second, "writing time per rate")
	idle := fs.Duration("idle", 10*time.Second, "time with no writes over which the idle relay's CPU is read")
	which := fs.String("variants", "listen,poll", "variants: listen (LISTEN/NOTIFY, default poll interval), poll (poll only, --poll-interval), default (the relay's default flags, plain writers), watermill (Watermill's forwarder, --wm-poll), cdc (--mode cdc, rows), cdc-tableless (--mode cdc, writers using outbox.WithCDCMessages)")
	pollInterval := fs.Duration("poll-interval", 10*time.Millisecond, "the poll variant's --poll-interval")
	writers := fs.Int("writers", 4, "writer connections sharing the schedule (a late writer does not delay the others)")
	aggs := fs.Int("aggregates", 1000, "aggregates the events are spread over")
	wait := fs.Duration("drain-timeout", 15*time.Second, "how long to wait for the last events after writing stops")
	var extra strList
	fs.Var(&extra, "relay-arg", "an extra `txbox relay` argument (repeat: --relay-arg=--workers --relay-arg=4)")
	wm := wmOpts{driver: "pgx"}
	fs.DurationVar(&wm.poll, "wm-poll", 10*time.Millisecond, "the watermill variant's PollInterval")
	fs.StringVar(&wm.schema, "wm-schema", "default", "the watermill variant's schema: default, or queue (PostgreSQLQueueSchema + DeleteOnAck)")
	fs.IntVar(&wm.batch, "wm-batch", 1000, "the watermill variant's SubscribeBatchSize")
	fs.parse(args)
	if *aggs < 1 {
		return fmt.Errorf("--aggregates %d: want at least 1", *aggs)
	}
	if err := wm.check(); err != nil {
		return err
	}
	variants, err := contenderList(*which, latencyVariants)
	if err != nil {
		return err
	}
	var bin string
	if slices.ContainsFunc(variants, func(v string) bool { return v != "watermill" }) {
		if bin, err = txboxBinary(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	var results []latencyResult
	for _, v := range variants {
		for _, rate := range *rates {
			o := latencyOpts{pg: *pg, natsURL: *natsURL, bin: bin, variant: v, wm: wm,
				rate: rate, duration: *duration, idle: *idle, writers: *writers, aggs: *aggs, wait: *wait}
			if v != "watermill" {
				o.relayFlags = append(latencyRelayFlags(v, pollInterval.String()), extra...)
			}
			r, err := latencyRun(ctx, o)
			if err != nil {
				return fmt.Errorf("%s at %d/s: %w", v, rate, err)
			}
			r.label = latencyLabel(o)
			results = append(results, r)
			fmt.Printf("  %-9s %5d/s: %d events (%.0f/s committed), p50 %v p90 %v p99 %v max %v, relay CPU idle %.2f%% load %.1f%%, database CPU %.0f%%\n",
				v, rate, r.events, r.achieved, ms(r.p50), ms(r.p90), ms(r.p99), ms(r.maxLat), r.idleCPU, r.loadCPU, r.dbLoadCPU)
		}
	}
	fmt.Printf("\ncommit-to-consumer latency, %v per rate, %d writers, %d aggregates; relay (or forwarder) CPU in %% of one core (idle: %v without writes); database CPU: the local PostgreSQL's while writing and delivering (the writers' own work included), %% of one core\n",
		*duration, *writers, *aggs, *idle)
	fmt.Printf("| variant | what ran | rate/s | committed/s | events | p50 ms | p90 ms | p99 ms | max ms | CPU idle %% | CPU load %% | database CPU %% |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		db := "-"
		if r.dbLoadCPU >= 0 {
			db = fmt.Sprintf("%.0f", r.dbLoadCPU)
		}
		fmt.Printf("| %s | %s | %d | %.0f | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %s |\n", r.variant, r.label, r.rate, r.achieved, r.events,
			msf(r.p50), msf(r.p90), msf(r.p99), msf(r.maxLat), r.idleCPU, r.loadCPU, db)
		if r.early > 0 {
			fmt.Printf("  (%d events arrived before their writer read the clock after COMMIT; counted as negative latencies)\n", r.early)
		}
	}
	latencyTargets(results)
	return nil
}

// latencyTargets prints issue 21's latency targets for the variants that
// ran: at 500/s, the default relay's p99 < 100 ms with an idle relay under
// 2% of a core, and the poll variant no worse than Watermill's forwarder
// (p50 and p99) in the same run.
func latencyTargets(results []latencyResult) {
	find := func(variant string, rate int) (latencyResult, bool) {
		for _, r := range results {
			if r.variant == variant && r.rate == rate {
				return r, true
			}
		}
		return latencyResult{}, false
	}
	for _, rate := range uniqueRates(results) {
		if d, ok := find("default", rate); ok {
			fmt.Printf("RESULT default %d/s: p99 %.2f ms (target < 100 at 500/s), idle CPU %.2f%% (target < 2)\n", rate, msf(d.p99), d.idleCPU)
		}
		p, okP := find("poll", rate)
		w, okW := find("watermill", rate)
		if okP && okW {
			fmt.Printf("RESULT poll/watermill %d/s: p50 %.2f / %.2f ms = %s, p99 %.2f / %.2f ms = %s (target <= 1 each)\n", rate,
				msf(p.p50), msf(w.p50), ratio(msf(p.p50), msf(w.p50)), msf(p.p99), msf(w.p99), ratio(msf(p.p99), msf(w.p99)))
		}
	}
}

func uniqueRates(results []latencyResult) []int {
	var rates []int
	for _, r := range results {
		if !slices.Contains(rates, r.rate) {
			rates = append(rates, r.rate)
		}
	}
	return rates
}

func ms(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
func msf(d time.Duration) float64      { return float64(d) / float64(time.Millisecond) }

type latencyOpts struct {
	pg, natsURL, bin, variant string
	relayFlags                []string // txbox variants
	wm                        wmOpts   // the watermill variant
	rate                      int
	duration, idle, wait      time.Duration
	writers, aggs             int
}

type stamp struct {
	id string
	t  time.Time
}

func latencyRun(ctx context.Context, o latencyOpts) (latencyResult, error) {
	res := latencyResult{variant: o.variant, rate: o.rate}
	e, err := newEnv(ctx, o.pg, o.natsURL, o.variant != "watermill")
	if err != nil {
		return res, err
	}
	defer e.close()

	var mu sync.Mutex
	recv := map[string]time.Time{}
	sub, err := e.nc.Subscribe(e.prefix+".>", func(m *nats.Msg) {
		t := time.Now()
		id := m.Header.Get(nats.MsgIdHdr)
		mu.Lock()
		if _, dup := recv[id]; !dup { // a republished copy keeps the first arrival
			recv[id] = t
		}
		mu.Unlock()
	})
	if err != nil {
		return res, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	if err := e.nc.Flush(); err != nil {
		return res, err
	}
	received := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := recv[id]
		return ok
	}

	startProducer := startTxboxProducer
	if o.variant == "watermill" {
		startProducer = startWatermillProducer
	}
	prod, err := startProducer(e, o)
	if err != nil {
		return res, err
	}
	relay := prod.proc
	defer func() {
		relay.stop()
		if prod.cleanup != nil {
			prod.cleanup()
		}
	}()

	pcfg := e.pool.Config().Copy()
	pcfg.MaxConns, pcfg.MinConns = int32(o.writers), int32(o.writers)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	write := func(i int) (stamp, error) {
		var id string
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			id, err = prod.write(ctx, tx, i)
			return err
		})
		return stamp{id, time.Now()}, err
	}

	// A probe event proves the relay runs and the subscription sees it.
	probe, err := write(0)
	if err != nil {
		return res, err
	}
	for deadline := time.Now().Add(30 * time.Second); !received(probe.id); time.Sleep(5 * time.Millisecond) {
		if err := relay.exited(); err != nil {
			return res, fmt.Errorf("%s exited: %w", relay.name, err)
		}
		if time.Now().After(deadline) {
			return res, errors.New("the probe event did not arrive within 30s")
		}
	}

	// Idle: nothing written, the relay polls (and LISTENs).
	time.Sleep(min(time.Second, o.idle))
	c0, t0 := relay.stats().cpu, time.Now()
	time.Sleep(o.idle)
	res.idleCPU = cpuPercent(relay.stats().cpu-c0, time.Since(t0))

	// Load: event i is due at start + i/rate; writers take due events in
	// order, so the schedule does not wait for a slow commit.
	jobs := make(chan int, 1<<16)
	start := time.Now()
	c0 = relay.stats().cpu
	db := newDBMeter()
	go func() {
		defer close(jobs)
		interval := time.Second / time.Duration(o.rate)
		for i := 1; ; i++ {
			due := start.Add(time.Duration(i-1) * interval)
			if due.Sub(start) >= o.duration {
				return
			}
			time.Sleep(time.Until(due))
			jobs <- i
		}
	}()
	stamps := make([][]stamp, o.writers)
	errs := make(chan error, o.writers)
	var wg sync.WaitGroup
	for k := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				s, err := write(i)
				if err != nil {
					errs <- err
					for range jobs { // let the dispatcher finish
					}
					return
				}
				stamps[k] = append(stamps[k], s)
			}
		}()
	}
	wg.Wait()
	writeWall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	all := slices.Concat(stamps...)
	if len(all) == 0 {
		return res, errors.New("no event was written")
	}
	res.events = len(all)
	res.achieved = float64(len(all)) / writeWall.Seconds()

	// Wait for the last events, then read the relay's CPU for the load phase.
	deadline := time.Now().Add(o.wait)
	missing := 0
	for {
		missing = 0
		mu.Lock()
		for _, s := range all {
			if _, ok := recv[s.id]; !ok {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		if err := relay.exited(); err != nil {
			return res, fmt.Errorf("%s exited: %w", relay.name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.loadCPU = cpuPercent(relay.stats().cpu-c0, time.Since(start))
	res.dbLoadCPU = -1
	if d := db.done(); d >= 0 {
		res.dbLoadCPU = cpuPercent(d, time.Since(start))
	}
	if missing > 0 {
		return res, fmt.Errorf("%d of %d events did not arrive within %v after writing stopped", missing, len(all), o.wait)
	}
	lat := make([]time.Duration, 0, len(all))
	mu.Lock()
	for _, s := range all {
		d := recv[s.id].Sub(s.t)
		if d < 0 {
			res.early++
		}
		lat = append(lat, d)
	}
	mu.Unlock()
	slices.Sort(lat)
	res.p50, res.p90, res.p99 = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
	res.maxLat = lat[len(lat)-1]
	return res, nil
}
