package main

// `bench skew`: the same backlog over a key-distribution axis (1, 10, 100,
// 1k, 100k aggregates and Zipf s=1.1 over 10k), every contender side by side
// in one run: txbox relay with default flags, two relays, the pipelined raw
// loop, and Watermill's forwarder. The setup (envs, backlogs, child
// processes, the stream clock) is drain's.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
)

// layout is how a backlog's events fall on aggregates: aggs of them in
// turn, or with zipf set, aggregate k with probability ~ 1/k^1.1 over aggs.
type layout struct {
	name string
	aggs int
	zipf bool
}

func parseLayouts(s string) ([]layout, error) {
	var out []layout
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "zipf" {
			out = append(out, layout{name: "zipf s=1.1/10k", aggs: 10_000, zipf: true})
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--layouts: %q is neither a positive number of aggregates nor zipf", f)
		}
		out = append(out, layout{name: fmt.Sprintf("%d aggregates", n), aggs: n})
	}
	return out, nil
}

// drainRawPipelined is the hand-written limit without order: inflight
// workers, each in its own transaction DELETE ... FOR UPDATE SKIP LOCKED
// RETURNING a batch, publish it asynchronously with Nats-Msg-Id, wait for
// the acks and commit, so several batches are in flight at once. The clock
// stops when the stream holds every event, as for the relays.
func drainRawPipelined(ctx context.Context, e *benchEnv, o drainOpts, inflight int) (drainResult, error) {
	js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4*o.batch*inflight))
	if err != nil {
		return drainResult{}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, inflight)
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				n, err := rawBatch(wctx, e, js, o.batch)
				if err != nil {
					if wctx.Err() == nil {
						errs <- err
					}
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	elapsed, err := e.waitStream(ctx, o.events, o.timeout, o.stall)
	cancel()
	wg.Wait()
	select {
	case werr := <-errs:
		if err == nil {
			err = werr
		}
	default:
	}
	return drainResult{events: o.events, elapsed: elapsed}, err
}

// rawBatch takes, publishes and deletes one batch in one transaction; it
// returns how many rows it took.
func rawBatch(ctx context.Context, e *benchEnv, js jetstream.JetStream, batch int) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM `+e.tables.Outbox+` WHERE id IN (
				SELECT id FROM `+e.tables.Outbox+` WHERE status = 'PENDING' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING id, event_id, aggregate_type, event_type, payload::text`, batch)
		if err != nil {
			return err
		}
		ids, err := publishRows(ctx, e, js, rows)
		n = len(ids)
		return err
	})
	return n, err
}

var skewNames = []string{"txbox", "txbox-2proc", "raw-pipelined", "watermill"}

func skewCmd(args []string) error {
	fs := newFlags("skew")
	pg, natsURL := fs.services()
	events := fs.Int("events", 1_000_000, "backlog size")
	layouts := fs.String("layouts", "1,10,100,1000,100000,zipf", "key distributions: numbers of aggregates, or zipf (s=1.1 over 10k)")
	runs := fs.Int("runs", 3, "runs per contender and layout")
	batch := fs.Int("batch", 1000, "raw loop batch size (txbox runs with its defaults)")
	inflight := fs.Int("raw-inflight", 3, "raw loop: batches (transactions) in flight")
	which := fs.String("only", strings.Join(skewNames, ","), "contenders: "+strings.Join(skewNames, ", "))
	timeout, stall := fs.drainLimits()
	var wm wmOpts
	fs.IntVar(&wm.batch, "wm-batch", 1000, "Watermill SubscribeBatchSize (take the best of `bench wmsweep`)")
	fs.StringVar(&wm.schema, "wm-schema", "default", "Watermill schema: default, or queue (PostgreSQLQueueSchema + DeleteOnAck)")
	fs.DurationVar(&wm.poll, "wm-poll", 10*time.Millisecond, "Watermill PollInterval")
	fs.StringVar(&relayLogLevel, "relay-log", relayLogLevel, "log level of the txbox relay processes (info: time per phase at stop)")
	fs.StringVar(&natsBatch, "nats-batch", natsBatch, "batch publish the streams allow where the server has it: fast (allow_batched, 2.14+, and allow_atomic), atomic (allow_atomic, 2.12+) or none")
	useKafka := fs.Bool("kafka", false, "publish to franz-go's in-process fake Kafka (kfake, a topic of 8 partitions per run) instead of NATS; txbox contenders only")
	embedded := fs.Bool("nats-embedded", false, "start a nats-server 2.15 in the bench process (atomic batch publish: the relay pipelines one aggregate's events) instead of using --broker")
	wm.perTx, wm.driver = 1, "pgx"
	fs.parse(args)
	if natsBatch != "fast" && natsBatch != "atomic" && natsBatch != "none" {
		return fmt.Errorf("--nats-batch %q: want fast, atomic or none", natsBatch)
	}
	if *embedded {
		url, stop, err := startEmbeddedNATS()
		if err != nil {
			return err
		}
		defer stop()
		*natsURL = url
	}
	ls, err := parseLayouts(*layouts)
	if err != nil {
		return err
	}
	order, err := contenderList(*which, skewNames)
	if err != nil {
		return err
	}
	if *useKafka {
		if err := kafkaOnly(order); err != nil {
			return err
		}
		stop, err := startKafka()
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := wm.check(); err != nil {
		return err
	}
	ctx := context.Background()
	bin, err := txboxBinary()
	if err != nil {
		return err
	}
	results := map[string]map[string][]drainResult{} // layout -> contender -> runs
	for _, l := range ls {
		results[l.name] = map[string][]drainResult{}
		o := drainOpts{events: *events, aggs: l.aggs, batch: *batch, timeout: *timeout, stall: *stall}
		for r := range *runs {
			for _, name := range order {
				isWM := name == "watermill"
				e, err := newEnv(ctx, *pg, *natsURL, !isWM)
				if err != nil {
					return err
				}
				if isWM {
					err = e.writeWatermillBacklog(ctx, o, &wm)
				} else {
					err = e.writeTxboxLayout(ctx, *events, l)
				}
				var res drainResult
				if err == nil {
					switch name {
					// The relays get nothing but the connection flags:
					// what a new user gets.
					case "txbox":
						res, err = drainRelays(ctx, e, bin, o, 1, e.relayArgs())
					case "txbox-2proc":
						res, err = drainRelays(ctx, e, bin, o, 2, e.relayArgs())
					case "raw-pipelined":
						res, err = drainRawPipelined(ctx, e, o, *inflight)
					case "watermill":
						res, err = drainWatermill(ctx, e, o, wm)
					}
				}
				e.close()
				if err != nil {
					return fmt.Errorf("%s, %s: %w", l.name, name, err)
				}
				results[l.name][name] = append(results[l.name][name], res)
				fmt.Printf("  %-16s run %d %-14s %8.0f events/s  (%v)\n", l.name, r+1, name, res.rate(), res.elapsed.Round(time.Millisecond))
			}
		}
	}
	printSkewTable(results, ls, order, *events, *runs, *inflight, *batch, wm, *useKafka)
	return nil
}

// printSkewTable prints the medians of the contenders that ran, and only
// the ratios whose both sides ran: a contender left out by --only gets no
// column and no description, rather than a column of zeros.
func printSkewTable(results map[string]map[string][]drainResult, ls []layout, order []string, events, runs, inflight, batch int, wm wmOpts, kafka bool) {
	ran := map[string]bool{}
	for _, n := range order {
		ran[n] = true
	}
	var desc []string
	if ran["txbox"] || ran["txbox-2proc"] {
		desc = append(desc, "txbox: `txbox relay` with default flags")
	}
	if ran["raw-pipelined"] {
		desc = append(desc, fmt.Sprintf("raw-pipelined: %d transactions in flight, batch %d", inflight, batch))
	}
	if ran["watermill"] {
		desc = append(desc, "watermill: "+wm.describe())
	}
	fmt.Printf("\nskew: %d events per backlog, medians of %d runs; %s\n", events, runs, strings.Join(desc, "; "))
	if kafka {
		fmt.Printf("broker: franz-go's in-process fake Kafka (kfake) at %s, a topic of %d partitions per run, records keyed by aggregate id\n", kafkaAddr, kafkaPartitions)
	}
	m := func(l, n string) float64 { return medianOf(results[l][n], drainResult.rate) }
	type column struct {
		head string
		cell func(l string) string
	}
	rate := func(n string) func(string) string {
		return func(l string) string { return fmt.Sprintf("%.0f", m(l, n)) }
	}
	var cols []column
	for _, c := range []struct{ name, head string }{{"txbox", "txbox"}, {"txbox-2proc", "txbox 2 relays"}, {"raw-pipelined", "raw pipelined"}, {"watermill", "watermill"}} {
		if ran[c.name] {
			cols = append(cols, column{c.head, rate(c.name)})
		}
	}
	hasSpread := false
	for _, l := range ls {
		hasSpread = hasSpread || l.name == "100000 aggregates"
	}
	if ran["txbox"] && hasSpread {
		spread := m("100000 aggregates", "txbox")
		cols = append(cols, column{"txbox / 100k layout", func(l string) string { return ratio(m(l, "txbox"), spread) }})
	}
	for _, c := range []struct{ a, b, head string }{
		{"txbox", "raw-pipelined", "txbox / raw"},
		{"txbox", "watermill", "txbox / watermill"},
		{"txbox-2proc", "txbox", "2 relays / 1"},
	} {
		if ran[c.a] && ran[c.b] {
			cols = append(cols, column{c.head, func(l string) string { return ratio(m(l, c.a), m(l, c.b)) }})
		}
	}
	fmt.Print("| layout |")
	for _, c := range cols {
		fmt.Printf(" %s |", c.head)
	}
	fmt.Print("\n|---|")
	for range cols {
		fmt.Print("---|")
	}
	fmt.Println()
	for _, l := range ls {
		fmt.Printf("| %s |", l.name)
		for _, c := range cols {
			fmt.Printf(" %s |", c.cell(l.name))
		}
		fmt.Println()
	}
}
