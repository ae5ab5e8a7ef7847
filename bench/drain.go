package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type drainResult struct {
	name    string
	events  int
	elapsed time.Duration
	rss     int64 // KB, peak of the largest relay process
	cpu     time.Duration
	dbCPU   time.Duration // the local PostgreSQL's, while the relays ran (-1: not measured)
}

func (r drainResult) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

type drainOpts struct {
	events, aggs, batch int
	timeout, stall      time.Duration
}

// drainChildren waits until the stream holds every event while procs relay
// them, then reads their peak RSS and CPU and stops them.
func drainChildren(ctx context.Context, e *benchEnv, o drainOpts, procs []*child) (drainResult, error) {
	elapsed, err := e.waitStream(ctx, o.events, o.timeout, o.stall, procs...)
	res := drainResult{events: o.events, elapsed: elapsed}
	for _, c := range procs {
		ps := c.stats()
		res.rss = max(res.rss, ps.peakRSSKB)
		res.cpu += ps.cpu
		c.stop()
	}
	return res, err
}

// drainTxbox runs `txbox relay` processes over the backlog until the stream
// holds every event.
func drainTxbox(ctx context.Context, e *benchEnv, bin string, o drainOpts, procs int, extra ...string) (drainResult, error) {
	args := append(e.relayArgs(), "--poll-interval", "50ms", "--batch-size", strconv.Itoa(o.batch))
	return drainRelays(ctx, e, bin, o, procs, append(args, extra...))
}

// drainRelays runs procs `txbox relay` processes with args, each with a
// relay id of its own, until the stream holds every event.
func drainRelays(ctx context.Context, e *benchEnv, bin string, o drainOpts, procs int, args []string) (drainResult, error) {
	var cs []*child
	for i := range procs {
		c, err := startChild(fmt.Sprintf("txbox relay %d", i), bin, append(args, "--relay-id", fmt.Sprintf("bench-%d", i))...)
		if err != nil {
			for _, c := range cs {
				c.stop()
			}
			return drainResult{}, err
		}
		cs = append(cs, c)
	}
	return drainChildren(ctx, e, o, cs)
}

// drainRaw is the hand-written limit: in one transaction claim a batch with
// FOR UPDATE SKIP LOCKED, publish it asynchronously with Nats-Msg-Id, wait
// for the acks, DELETE the batch, commit. No ordering lanes, no leases, no
// retries: what a relay costs without its guarantees.
func drainRaw(ctx context.Context, e *benchEnv, events, batch int) (drainResult, error) {
	js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return drainResult{}, err
	}
	start := time.Now()
	sent := 0
	for sent < events {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id, event_id, aggregate_type, event_type, payload::text FROM `+e.tables.Outbox+`
				WHERE status = 'PENDING' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, batch)
			if err != nil {
				return err
			}
			ids, err := publishRows(ctx, e, js, rows)
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return fmt.Errorf("outbox empty with %d of %d sent", sent, events)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM `+e.tables.Outbox+` WHERE id = ANY($1)`, ids); err != nil {
				return err
			}
			sent += len(ids)
			return nil
		})
		if err != nil {
			return drainResult{}, err
		}
	}
	return drainResult{events: events, elapsed: time.Since(start)}, nil
}

// publishRows publishes each row (id, event_id, aggregate_type,
// event_type, payload) to e's stream asynchronously with Nats-Msg-Id, waits
// for every ack, and returns the rows' ids: the raw loops' publish step.
func publishRows(ctx context.Context, e *benchEnv, js jetstream.JetStream, rows pgx.Rows) ([]int64, error) {
	var ids []int64
	var futs []jetstream.PubAckFuture
	for rows.Next() {
		var id int64
		var eid, at, et, payload string
		if err := rows.Scan(&id, &eid, &at, &et, &payload); err != nil {
			return nil, err
		}
		m := nats.NewMsg(e.prefix + "." + at + "." + et)
		m.Header.Set("Nats-Msg-Id", eid)
		m.Data = []byte(payload)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		futs = append(futs, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return ids, nil
}

// drainContender is one way of draining a backlog; watermill says whether
// its backlog is written in Watermill's schema instead of txbox's.
type drainContender struct {
	watermill bool
	traced    bool // its backlog carries writers' traceparents
	cdc       bool // a replication slot exists before the backlog is written
	run       func(*benchEnv) (drainResult, error)
}

var drainNames = []string{"raw", "txbox", "txbox-delete", "txbox-2proc", "txbox-lease", "watermill", "txbox-metrics", "txbox-tracedrows", "txbox-traced", "txbox-cdc"}

func drainCmd(args []string) error {
	fs := newFlags("drain")
	pg, natsURL := fs.services()
	events := fs.Int("events", 1_000_000, "backlog size")
	aggs := fs.Int("aggregates", 100_000, "aggregates the backlog is spread over")
	runs := fs.Int("runs", 3, "runs per contender")
	batch := fs.Int("batch", 1000, "batch size for every contender (Watermill: SubscribeBatchSize)")
	which := fs.String("only", strings.Join(drainNames, ","), "contenders, comma separated: "+strings.Join(drainNames, ", "))
	timeout, stall := fs.drainLimits()
	sampledPct := fs.Int("traced-sampled", 100, "txbox-traced: percent of the backlog whose writer's span was sampled (the rest carry an unsampled traceparent)")
	fs.StringVar(&relayLogLevel, "relay-log", relayLogLevel, "log level of the txbox relay processes (info: time per phase at stop)")
	var wm wmOpts
	fs.IntVar(&wm.perTx, "wm-events-per-tx", 1, "Watermill backlog: events per writing transaction id (0: the whole backlog in the one inserting transaction)")
	fs.DurationVar(&wm.poll, "wm-poll", 10*time.Millisecond, "Watermill SQL subscriber PollInterval (only waited when a query finds nothing)")
	fs.StringVar(&wm.driver, "wm-driver", "pgx", "Watermill SQL subscriber's database access: pgx (BeginnerFromPgx on a pgxpool) or stdlib (database/sql with pgx/v5/stdlib)")
	fs.StringVar(&wm.cpuProfile, "wm-cpuprofile", "", "the Watermill forwarder process writes its CPU profile to this file (with --runs > 1, the last run's) and prints its time inside the NATS Publish")
	fs.parse(args)
	order, err := contenderList(*which, drainNames)
	if err != nil {
		return err
	}
	ctx := context.Background()
	bin, err := txboxBinary()
	if err != nil {
		return err
	}
	o := drainOpts{events: *events, aggs: *aggs, batch: *batch, timeout: *timeout, stall: *stall}
	wm.batch = *batch
	contenders := map[string]drainContender{
		"raw": {run: func(e *benchEnv) (drainResult, error) { return drainRaw(ctx, e, *events, *batch) }},
		"txbox": {run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1)
		}},
		"txbox-delete": {run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1, "--delete-sent")
		}},
		"txbox-2proc": {run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 2)
		}},
		"txbox-lease": {run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1, "--claims", "lease")
		}},
		"txbox-metrics": {run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1, "--metrics-addr", "127.0.0.1:0")
		}},
		"txbox-tracedrows": {traced: true, run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1)
		}},
		"txbox-traced": {traced: true, run: func(e *benchEnv) (drainResult, error) {
			return withOTLP(func() (drainResult, error) { return drainTxbox(ctx, e, bin, o, 1, "--metrics-addr", "127.0.0.1:0") })
		}},
		// --mode cdc: the relay reads the backlog from the log (its slot
		// existed when the backlog was written).
		"txbox-cdc": {cdc: true, run: func(e *benchEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, o, 1, "--mode", "cdc", "--slot", e.slot)
		}},
		"watermill": {watermill: true, run: func(e *benchEnv) (drainResult, error) {
			return drainWatermill(ctx, e, o, wm)
		}},
	}
	results := map[string][]drainResult{}
	for r := range *runs {
		for _, name := range order {
			c := contenders[name]
			e, err := newEnv(ctx, *pg, *natsURL, !c.watermill)
			if err != nil {
				return err
			}
			var dropSlot func()
			if c.cdc {
				e.slot, dropSlot, err = cdcSetup(ctx, e)
				if err != nil {
					e.close()
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			if c.watermill {
				err = e.writeWatermillBacklog(ctx, o, &wm)
			} else if c.traced {
				err = e.writeTracedBacklog(ctx, *events, *aggs, *sampledPct)
			} else {
				err = e.writeTxboxBacklog(ctx, *events, *aggs)
			}
			var res drainResult
			if err == nil {
				db := newDBMeter()
				res, err = c.run(e)
				res.dbCPU = db.done()
			}
			if dropSlot != nil {
				dropSlot()
			}
			e.close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.name = name
			results[name] = append(results[name], res)
			fmt.Printf("  run %d %-14s %8.0f events/s  (%v, peak RSS %d MB, CPU %v, database CPU %v)\n", r+1, name, res.rate(), res.elapsed.Round(time.Millisecond), res.rss/1024, res.cpu.Round(10*time.Millisecond), res.dbCPU.Round(10*time.Millisecond))
		}
	}
	fmt.Printf("\ndrain of %d events over %d aggregates, batch %d, medians of %d runs\n", *events, *aggs, *batch, *runs)
	if _, ok := results["txbox-traced"]; ok {
		fmt.Printf("txbox-traced: %d%% of the writers' spans sampled\n", *sampledPct)
	}
	if _, ok := results["watermill"]; ok {
		fmt.Printf("watermill: %s\n", wm.describe())
	}
	fmt.Printf("| contender | events/s (median) | vs raw | vs watermill | peak RSS (MB, median) | CPU s (median) | database CPU s (median) |\n|---|---|---|---|---|---|---|\n")
	rawRate := medianOf(results["raw"], drainResult.rate)
	wmRate := medianOf(results["watermill"], drainResult.rate)
	for _, name := range order {
		rate := medianOf(results[name], drainResult.rate)
		rss := medianOf(results[name], func(r drainResult) float64 { return float64(r.rss) / 1024 })
		cpu := medianOf(results[name], func(r drainResult) float64 { return r.cpu.Seconds() })
		db := medianOf(results[name], func(r drainResult) float64 { return r.dbCPU.Seconds() })
		fmt.Printf("| %s | %.0f | %s | %s | %.0f | %.2f | %s |\n", name, rate, ratio(rate, rawRate), ratio(rate, wmRate), rss, cpu, cpuSeconds(db))
	}
	has := func(n string) bool { return len(results[n]) > 0 }
	m := func(n string) float64 { return medianOf(results[n], drainResult.rate) }
	if has("txbox") {
		fmt.Printf("RESULT txbox %.0f events/s (target >= 30000)\n", m("txbox"))
	}
	if has("txbox") && has("watermill") {
		fmt.Printf("RESULT txbox/watermill %s (target >= 4)\n", ratio(m("txbox"), m("watermill")))
	}
	for _, n := range []string{"txbox-metrics", "txbox-tracedrows", "txbox-traced"} {
		if has(n) && has("txbox") {
			fmt.Printf("RESULT %s/txbox %s\n", n, ratio(m(n), m("txbox")))
		}
	}
	if has("txbox-traced") && has("txbox-tracedrows") {
		fmt.Printf("RESULT txbox-traced/txbox-tracedrows %s (tracing on vs off, same backlog)\n", ratio(m("txbox-traced"), m("txbox-tracedrows")))
	}
	if has("txbox-cdc") && has("txbox") {
		fmt.Printf("RESULT txbox-cdc/txbox %s (target >= 1: CDC drains at least as fast as polling)\n", ratio(m("txbox-cdc"), m("txbox")))
	}
	if has("txbox-2proc") && has("txbox") {
		fmt.Printf("RESULT txbox-2proc/txbox %s (target >= 1)\n", ratio(m("txbox-2proc"), m("txbox")))
	}
	return nil
}
