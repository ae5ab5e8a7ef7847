package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store/postgres"
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
// Variants: "listen" is `--wakeup listen` at the default 500ms poll
// interval with writers using outbox.WithWakeup (NOTIFY at commit); "poll"
// is `--wakeup poll --poll-interval <--poll-interval>` with plain writers.

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
	variant          string
	rate             int
	events           int
	achieved         float64 // commits per second
	p50, p90, p99    time.Duration
	maxLat           time.Duration
	early            int // received before the writer had read the clock after COMMIT
	idleCPU, loadCPU float64
}

var latencyVariants = []string{"listen", "poll", "cdc", "cdc-tableless"}

func latencyCmd(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	pg := fs.String("db", defaultPG, "PostgreSQL URL")
	natsURL := fs.String("broker", defaultNATS, "NATS URL")
	var rates intList
	fs.Var(&rates, "rate", "events per second, one per transaction (repeat or comma-separate for several; default 500)")
	duration := fs.Duration("duration", 20*time.Second, "writing time per rate")
	idle := fs.Duration("idle", 10*time.Second, "time with no writes over which the idle relay's CPU is read")
	which := fs.String("variants", "listen,poll", "relay variants: listen (LISTEN/NOTIFY, default 500ms poll), poll (poll only), cdc (--mode cdc, rows), cdc-tableless (--mode cdc, writers using outbox.WithCDCMessages)")
	pollInterval := fs.Duration("poll-interval", 10*time.Millisecond, "the poll variant's --poll-interval")
	writers := fs.Int("writers", 4, "writer connections sharing the schedule (a late writer does not delay the others)")
	aggs := fs.Int("aggregates", 1000, "aggregates the events are spread over")
	wait := fs.Duration("drain-timeout", 15*time.Second, "how long to wait for the last events after writing stops")
	var extra strList
	fs.Var(&extra, "relay-arg", "an extra `txbox relay` argument (repeat: --relay-arg=--workers --relay-arg=4)")
	_ = fs.Parse(args)
	if len(rates) == 0 {
		rates = intList{500}
	}
	variants, err := contenderList(*which, latencyVariants)
	if err != nil {
		return err
	}
	bin, err := txboxBinary()
	if err != nil {
		return err
	}
	ctx := context.Background()
	var results []latencyResult
	for _, v := range variants {
		for _, rate := range rates {
			relayFlags := []string{"--wakeup", "listen"}
			switch v {
			case "poll":
				relayFlags = []string{"--wakeup", "poll", "--poll-interval", pollInterval.String()}
			case "cdc", "cdc-tableless":
				relayFlags = []string{"--mode", "cdc"} // --slot: per run
			}
			relayFlags = append(relayFlags, extra...)
			r, err := latencyRun(ctx, latencyOpts{pg: *pg, natsURL: *natsURL, bin: bin, variant: v, relayFlags: relayFlags,
				rate: rate, duration: *duration, idle: *idle, writers: *writers, aggs: *aggs, wait: *wait})
			if err != nil {
				return fmt.Errorf("%s at %d/s: %w", v, rate, err)
			}
			results = append(results, r)
			fmt.Printf("  %-6s %5d/s: %d events (%.0f/s committed), p50 %v p90 %v p99 %v max %v, relay CPU idle %.2f%% load %.1f%%\n",
				v, rate, r.events, r.achieved, ms(r.p50), ms(r.p90), ms(r.p99), ms(r.maxLat), r.idleCPU, r.loadCPU)
		}
	}
	fmt.Printf("\ncommit-to-consumer latency, %v per rate; relay CPU in %% of one core (idle: %v without writes)\n", *duration, *idle)
	fmt.Printf("| relay | rate/s | committed/s | events | p50 ms | p90 ms | p99 ms | max ms | CPU idle %% | CPU load %% |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		name := "--wakeup listen, poll 500ms"
		switch r.variant {
		case "poll":
			name = "--wakeup poll, poll " + pollInterval.String()
		case "cdc":
			name = "--mode cdc, rows"
		case "cdc-tableless":
			name = "--mode cdc, tableless (logical messages)"
		}
		fmt.Printf("| %s | %d | %.0f | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", name, r.rate, r.achieved, r.events,
			msf(r.p50), msf(r.p90), msf(r.p99), msf(r.maxLat), r.idleCPU, r.loadCPU)
		if r.early > 0 {
			fmt.Printf("  (%d events arrived before their writer read the clock after COMMIT; counted as negative latencies)\n", r.early)
		}
	}
	return nil
}

func ms(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
func msf(d time.Duration) float64      { return float64(d) / float64(time.Millisecond) }

type latencyOpts struct {
	pg, natsURL, bin, variant string
	relayFlags                []string
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
	e, err := newEnv(ctx, o.pg, o.natsURL, true)
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

	relayFlags := o.relayFlags
	if o.variant == "cdc" || o.variant == "cdc-tableless" {
		slot, cleanup, err := cdcSetup(ctx, e)
		if err != nil {
			return res, err
		}
		defer cleanup()
		relayFlags = append(relayFlags, "--slot", slot)
	}
	relay, err := startChild("txbox relay", o.bin, append(e.relayArgs(), relayFlags...)...)
	if err != nil {
		return res, err
	}
	defer relay.stop()

	var opts []outbox.Option
	switch o.variant {
	case "listen":
		opts = append(opts, outbox.WithWakeup())
	case "cdc-tableless":
		opts = append(opts, outbox.WithCDCMessages())
	}
	w := outbox.NewWriter(postgres.Dialect{Tables: e.tables}, opts...)
	pcfg := e.pool.Config().Copy()
	pcfg.MaxConns, pcfg.MinConns = int32(o.writers), int32(o.writers)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	write := func(i int) (stamp, error) {
		ev, err := txbox.NewEvent("Order", "order-"+strconv.Itoa(i%o.aggs), "OrderCreated", payloadFor(i))
		if err != nil {
			return stamp{}, err
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return w.AddPgx(ctx, tx, ev) })
		return stamp{ev.ID, time.Now()}, err
	}

	// A probe event proves the relay runs and the subscription sees it.
	probe, err := write(0)
	if err != nil {
		return res, err
	}
	for deadline := time.Now().Add(30 * time.Second); !received(probe.id); time.Sleep(5 * time.Millisecond) {
		if err := relay.exited(); err != nil {
			return res, fmt.Errorf("relay exited: %w", err)
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
			return res, fmt.Errorf("relay exited: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.loadCPU = cpuPercent(relay.stats().cpu-c0, time.Since(start))
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
