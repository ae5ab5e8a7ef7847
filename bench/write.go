package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/otel"
)

// write answers: what does adding an event to a business transaction cost,
// written by hand and through txbox's write API? Each contender runs the
// same business transaction (INSERT an order, UPDATE its customer's counter
// row) from --clients connections for --duration; "handwritten" adds one
// plain INSERT into the txbox outbox table, "txbox" adds the same event
// through pgxtx.Add with an outbox.Writer. Tables are fresh for every run.
// "handwritten-8col" is the hand-written INSERT binding the 8 columns txbox
// binds (aggregate_version, headers, occurred_at too), to price them apart
// from the API. The contenders' order rotates from run to run, so none is
// always the one that runs first, or after the same neighbour. On a machine
// whose load drifts, --interleave measures all contenders in the same
// seconds instead (see writeInterleaved). "txbox-cdcmsg" writes the event
// as a logical decoding message (outbox.WithCDCMessages) instead of a row.

var writeNames = []string{"business", "handwritten", "handwritten-8col", "txbox", "txbox-wakeup", "txbox-traced", "txbox-cdcmsg"}

type writeEnv struct {
	orders, counters, outbox string
	w                        *outbox.Writer
}

// orderEvent is the event of one order, the same value for both ways of
// writing it.
type orderEvent struct {
	OrderID  int64  `json:"order_id"`
	Customer int    `json:"customer"`
	Amount   int    `json:"amount"`
	Note     string `json:"note"`
}

var note200 = strings.Repeat("n", 200)

// businessTx is the transaction every contender runs; event, when set,
// adds the outbox write inside it.
func (we *writeEnv) businessTx(ctx context.Context, pool *pgxpool.Pool, rng *rand.Rand, counters int, event func(tx pgx.Tx, ev orderEvent) error) error {
	customer := rng.IntN(counters)
	amount := 100 + rng.IntN(100_000)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO `+we.orders+` (customer_id, amount_cents, status, note) VALUES ($1, $2, 'NEW', $3) RETURNING id`,
			customer, amount, "bench order").Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+we.counters+` SET orders = orders + 1, amount_cents = amount_cents + $2 WHERE customer_id = $1`, customer, amount); err != nil {
			return err
		}
		if event == nil {
			return nil
		}
		return event(tx, orderEvent{OrderID: id, Customer: customer, Amount: amount, Note: note200})
	})
}

func writeCmd(args []string) error {
	fs := newFlags("write")
	pg := fs.pg()
	clients := fs.Int("clients", 2, "concurrent connections, one transaction at a time each")
	duration := fs.Duration("duration", 10*time.Second, "measured time per run")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before each run")
	runs := fs.Int("runs", 3, "runs per contender")
	counters := fs.Int("counters", 100, "customer counter rows the UPDATE picks from")
	which := fs.String("only", "business,handwritten,txbox", "contenders, comma separated: "+strings.Join(writeNames, ", "))
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each contender's runs to PREFIX-<contender>-<run>.pprof")
	interleave := fs.Bool("interleave", false, "run the contenders side by side on the same tables, each client taking them in turn, transaction by transaction: drift of the machine's load hits all alike")
	fs.parse(args)
	order, err := contenderList(*which, writeNames)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(*pg)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(*clients)
	cfg.MinConns = int32(*clients)
	results := map[string][]float64{}
	for r := range *runs {
		if *interleave {
			rates, err := writeInterleaved(ctx, cfg, order, *clients, *counters, *warmup, *duration)
			if err != nil {
				return err
			}
			for _, name := range order {
				results[name] = append(results[name], rates[name])
				fmt.Printf("  run %d %-16s %8.0f tx/s\n", r+1, name, rates[name])
			}
			continue
		}
		for k := range order {
			name := order[(k+r)%len(order)]
			prof := ""
			if *cpuprofile != "" {
				prof = fmt.Sprintf("%s-%s-%d.pprof", *cpuprofile, name, r+1)
			}
			rate, err := writeRun(ctx, cfg, name, *clients, *counters, *warmup, *duration, prof)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			results[name] = append(results[name], rate)
			fmt.Printf("  run %d %-16s %8.0f tx/s\n", r+1, name, rate)
		}
	}
	how := "order rotated per run"
	if *interleave {
		how = "contenders interleaved transaction by transaction; tx/s = clients / mean transaction time"
	}
	fmt.Printf("\nwrite path, %d clients, %v per run, medians of %d runs (%s)\n", *clients, *duration, *runs, how)
	fmt.Printf("| contender | tx/s (median) | vs business | vs handwritten |\n|---|---|---|---|\n")
	m := func(n string) float64 { return medianOf(results[n], func(x float64) float64 { return x }) }
	for _, name := range order {
		fmt.Printf("| %s | %.0f | %s | %s |\n", name, m(name), ratio(m(name), m("business")), ratio(m(name), m("handwritten")))
	}
	if len(results["handwritten-8col"]) > 0 && len(results["handwritten"]) > 0 {
		fmt.Printf("RESULT handwritten-8col/handwritten %s\n", ratio(m("handwritten-8col"), m("handwritten")))
	}
	if len(results["txbox"]) > 0 && len(results["handwritten-8col"]) > 0 {
		fmt.Printf("RESULT txbox/handwritten-8col %s\n", ratio(m("txbox"), m("handwritten-8col")))
	}
	if len(results["business"]) > 0 && len(results["handwritten"]) > 0 {
		fmt.Printf("RESULT handwritten/business %s\n", ratio(m("handwritten"), m("business")))
	}
	if len(results["txbox-cdcmsg"]) > 0 && len(results["handwritten"]) > 0 {
		fmt.Printf("RESULT txbox-cdcmsg/handwritten %s (target >= 1.0)\n", ratio(m("txbox-cdcmsg"), m("handwritten")))
	}
	if len(results["txbox"]) > 0 && len(results["handwritten"]) > 0 {
		fmt.Printf("RESULT txbox/handwritten %s (target >= 0.97)\n", ratio(m("txbox"), m("handwritten")))
		// The same ratio taken run by run, where the two ran minutes apart at
		// most, then the median: less exposed to the machine's load drifting
		// between runs than the ratio of medians.
		per := make([]float64, len(results["txbox"]))
		for r := range per {
			per[r] = results["txbox"][r] / results["handwritten"][r]
		}
		fmt.Printf("RESULT txbox/handwritten median of per-run ratios %.2f\n", median(per))
	}
	return nil
}

// writeRun measures one contender on fresh tables: committed transactions
// per second over duration, after warmup.
func writeRun(ctx context.Context, cfg *pgxpool.Config, name string, clients, counters int, warmup, duration time.Duration, cpuprofile string) (float64, error) {
	e, err := newWriteEnv(ctx, cfg, counters)
	if err != nil {
		return 0, err
	}
	defer e.close()
	we := e.we
	event := eventFor(ctx, name, we, e.env.tables)
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+duration)
	var counted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			for {
				if err := we.businessTx(ctx, e.pool, rng, counters, event); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				if now.After(until) {
					return
				}
				if now.After(from) {
					counted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(counted.Load()) / duration.Seconds(), nil
}

// eventFor returns what contender name adds to the business transaction
// (nil: nothing).
func eventFor(ctx context.Context, name string, we *writeEnv, tables store.Tables) func(tx pgx.Tx, ev orderEvent) error {
	switch name {
	case "business":
		return nil
	case "handwritten":
		q := `INSERT INTO ` + we.outbox + ` (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, $4, $5)`
		return func(tx pgx.Tx, ev orderEvent) error {
			payload, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, q, txbox.NewID(), "Order", strconv.FormatInt(ev.OrderID, 10), "OrderCreated", payload)
			return err
		}
	case "handwritten-8col":
		q := `INSERT INTO ` + we.outbox + ` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers, occurred_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
		return func(tx pgx.Tx, ev orderEvent) error {
			payload, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, q, txbox.NewID(), "Order", strconv.FormatInt(ev.OrderID, 10), int64(0), "OrderCreated", payload,
				(*string)(nil), time.Now().UTC())
			return err
		}
	case "txbox", "txbox-wakeup", "txbox-traced", "txbox-cdcmsg":
		w := outbox.NewWriter(postgres.Dialect{Tables: tables})
		switch name {
		case "txbox-wakeup":
			w = outbox.NewWriter(postgres.Dialect{Tables: tables}, outbox.WithWakeup())
		case "txbox-cdcmsg":
			// The tableless write path: a logical decoding message instead
			// of the row (wal_level = logical).
			w = outbox.NewWriter(postgres.Dialect{Tables: tables}, outbox.WithCDCMessages())
		}
		traced := name == "txbox-traced"
		if traced {
			w = outbox.NewWriter(postgres.Dialect{Tables: tables}, outbox.WithTracer(otel.NewTracer(benchTP)))
		}
		return func(tx pgx.Tx, ev orderEvent) error {
			te, err := txbox.NewEvent("Order", strconv.FormatInt(ev.OrderID, 10), "OrderCreated", ev)
			if err != nil {
				return err
			}
			if traced {
				sctx, span := benchTracer.Start(ctx, "place order")
				defer span.End()
				return pgxtx.Add(sctx, tx, w, te)
			}
			return pgxtx.Add(ctx, tx, w, te)
		}
	}
	return nil
}

type writeRunEnv struct {
	env  *benchEnv
	pool *pgxpool.Pool
	we   *writeEnv
}

// newWriteEnv makes fresh orders, counters and txbox tables, and a pool of
// exactly clients connections for the measured transactions.
func newWriteEnv(ctx context.Context, cfg *pgxpool.Config, counters int) (*writeRunEnv, error) {
	env, err := newEnv(ctx, cfg.ConnString(), "", true)
	if err != nil {
		return nil, err
	}
	we := &writeEnv{orders: env.table("orders"), counters: env.table("counters"), outbox: env.tables.Outbox}
	for _, q := range []string{
		`CREATE TABLE ` + we.orders + ` (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, customer_id INT NOT NULL,
			amount_cents BIGINT NOT NULL, status VARCHAR(16) NOT NULL, note TEXT, created_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		`CREATE TABLE ` + we.counters + ` (customer_id INT PRIMARY KEY, orders BIGINT NOT NULL DEFAULT 0, amount_cents BIGINT NOT NULL DEFAULT 0)`,
		`INSERT INTO ` + we.counters + ` (customer_id) SELECT g FROM generate_series(0, ` + strconv.Itoa(counters-1) + `) g`,
	} {
		if _, err := env.pool.Exec(ctx, q); err != nil {
			env.close()
			return nil, err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		env.close()
		return nil, err
	}
	return &writeRunEnv{env: env, pool: pool, we: we}, nil
}

func (e *writeRunEnv) close() {
	e.pool.Close()
	e.env.close()
}

// writeInterleaved measures all contenders in one run on the same fresh
// tables: client c's i-th transaction is contender (i+c) mod len(names), so
// every contender sees the same load, table size and moment. A contender's
// rate is clients / its mean transaction time (begin to commit, measured
// after warmup): the rate it would have alone at that latency.
func writeInterleaved(ctx context.Context, cfg *pgxpool.Config, names []string, clients, counters int, warmup, duration time.Duration) (map[string]float64, error) {
	e, err := newWriteEnv(ctx, cfg, counters)
	if err != nil {
		return nil, err
	}
	defer e.close()
	events := make([]func(tx pgx.Tx, ev orderEvent) error, len(names))
	for k, name := range names {
		events[k] = eventFor(ctx, name, e.we, e.env.tables)
	}
	type tally struct {
		n   int64
		sum time.Duration
	}
	tallies := make([][]tally, clients) // per client, per contender
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+duration)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		tallies[c] = make([]tally, len(names))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			for i := c; ; i++ {
				k := i % len(names)
				t0 := time.Now()
				if err := e.we.businessTx(ctx, e.pool, rng, counters, events[k]); err != nil {
					errs <- fmt.Errorf("%s: %w", names[k], err)
					return
				}
				now := time.Now()
				if now.After(until) {
					return
				}
				if t0.After(from) {
					tallies[c][k].n++
					tallies[c][k].sum += now.Sub(t0)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	rates := map[string]float64{}
	for k, name := range names {
		var t tally
		for c := range clients {
			t.n += tallies[c][k].n
			t.sum += tallies[c][k].sum
		}
		if t.n > 0 {
			rates[name] = float64(clients) / (t.sum.Seconds() / float64(t.n))
		}
	}
	return rates, nil
}
