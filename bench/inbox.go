package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store/postgres"
)

// inbox answers: what does txbox's inbox cost over a hand-written
// exactly-once consume loop? Each run pre-publishes --events txbox events
// (CloudEvents binary mode, as the relay sends them) to a fresh stream, then
// one contender drains them from a durable pull consumer into a fresh
// business table:
//
//   - txbox: inbox.New on the PostgreSQL store, per-event mode: one transaction per event
//     (inbox row + business INSERT + processed mark), acknowledged after the
//     commit. BatchSize = --batch deliveries per receive.
//   - txbox-batch: the same consumer with TxBatch = --tx-batch: up to that
//     many deliveries (of one receive) in one transaction, a savepoint per
//     event, acknowledged after the commit.
//   - handwritten: per message BEGIN; INSERT ... ON CONFLICT DO NOTHING into
//     a dedupe table (its row is the processed mark); if new, the business
//     INSERT; COMMIT; then ack.
//
// The contenders are made alike: the same kind of durable pull consumer
// (explicit ack, ack wait 30s, unlimited deliveries, the server's
// MaxAckPending), FetchNoWait of --batch messages while any are ready and a
// one-message long poll otherwise, the same pgx pool, the same business
// INSERT, and an ack that does not wait for the server's confirmation
// (--double-ack makes the handwritten loop wait, as txbox did before it sent
// acks asynchronously).
//
// Timing starts once the durable consumer exists and ends when the last
// event is committed. The contenders take turns within each run (the order
// rotates), and the ratios are given per run as well as from the medians: on
// a busy machine the ratio within one run is the steadier figure.

var inboxNames = []string{"txbox", "txbox-batch", "handwritten"}

type inboxOpts struct {
	events, aggs, batch, txBatch int
	doubleAck                    bool
	timeout                      time.Duration
}

type inboxEnv struct {
	*benchEnv
	biz, dedupe string
}

const bizCols = `(event_id, aggregate_id, payload) VALUES ($1, $2, $3)`

var inboxContenders = map[string]func(context.Context, *inboxEnv, inboxOpts) (time.Duration, error){
	"txbox": func(ctx context.Context, e *inboxEnv, o inboxOpts) (time.Duration, error) {
		return inboxTxbox(ctx, e, o, 1)
	},
	"txbox-batch": func(ctx context.Context, e *inboxEnv, o inboxOpts) (time.Duration, error) {
		return inboxTxbox(ctx, e, o, o.txBatch)
	},
	"handwritten": inboxHandwritten,
}

func inboxCmd(args []string) error {
	fs := newFlags("inbox")
	pg, natsURL := fs.services()
	var o inboxOpts
	fs.IntVar(&o.events, "events", 100_000, "events pre-published per run")
	fs.IntVar(&o.aggs, "aggregates", 1000, "aggregates the events are spread over")
	fs.IntVar(&o.batch, "batch", 64, "deliveries per fetch, for every contender (txbox: inbox.Config.BatchSize)")
	fs.IntVar(&o.txBatch, "tx-batch", 64, "txbox-batch: deliveries per transaction (inbox.Config.TxBatch; at most --batch count)")
	fs.BoolVar(&o.doubleAck, "double-ack", false, "handwritten acks with DoubleAck (waits for the server) instead of Ack")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "longest one drain may take")
	runs := fs.Int("runs", 3, "runs per contender")
	which := fs.String("only", strings.Join(inboxNames, ","), "contenders, comma separated: "+strings.Join(inboxNames, ", "))
	fs.parse(args)
	order, err := contenderList(*which, inboxNames)
	if err != nil {
		return err
	}
	ctx := context.Background()
	results := map[string][]float64{}
	perRun := map[string][]float64{} // ratio name -> one value per run
	ratios := []struct{ name, a, b, target string }{
		{"txbox/handwritten", "txbox", "handwritten", ">= 0.80"},
		{"txbox-batch/txbox", "txbox-batch", "txbox", ">= 3"},
		{"txbox-batch/handwritten", "txbox-batch", "handwritten", ""},
	}
	for r := range *runs {
		got := map[string]float64{}
		for i := range order {
			name := order[(i+r)%len(order)]
			rate, err := inboxRun(ctx, *pg, *natsURL, name, o)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			results[name] = append(results[name], rate)
			got[name] = rate
			fmt.Printf("  run %d %-12s %8.0f events/s\n", r+1, name, rate)
		}
		var line []string
		for _, q := range ratios {
			if got[q.a] > 0 && got[q.b] > 0 {
				perRun[q.name] = append(perRun[q.name], got[q.a]/got[q.b])
				line = append(line, q.name+" "+ratio(got[q.a], got[q.b]))
			}
		}
		if len(line) > 0 {
			fmt.Printf("  run %d ratios: %s\n", r+1, strings.Join(line, ", "))
		}
	}
	fmt.Printf("\ninbox consume of %d events over %d aggregates, fetch batch %d, txbox-batch %d per transaction, medians of %d runs\n",
		o.events, o.aggs, o.batch, min(o.txBatch, o.batch), *runs)
	fmt.Printf("| contender | events/s (median) | vs handwritten | vs txbox per-event |\n|---|---|---|---|\n")
	m := func(n string) float64 { return medianOf(results[n], func(x float64) float64 { return x }) }
	for _, name := range order {
		fmt.Printf("| %s | %.0f | %s | %s |\n", name, m(name), ratio(m(name), m("handwritten")), ratio(m(name), m("txbox")))
	}
	for _, q := range ratios {
		if len(perRun[q.name]) == 0 {
			continue
		}
		target := ""
		if q.target != "" {
			target = " (target " + q.target + ")"
		}
		fmt.Printf("RESULT %s %s of the medians, %.2f median of the per-run ratios%s\n",
			q.name, ratio(m(q.a), m(q.b)), median(append([]float64(nil), perRun[q.name]...)), target)
	}
	return nil
}

func inboxRun(ctx context.Context, pg, natsURL, name string, o inboxOpts) (float64, error) {
	be, err := newEnv(ctx, pg, natsURL, true)
	if err != nil {
		return 0, err
	}
	defer be.close()
	e := &inboxEnv{benchEnv: be, biz: be.table("biz"), dedupe: be.table("dedupe")}
	for _, q := range []string{
		`CREATE TABLE ` + e.biz + ` (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, event_id VARCHAR(64) NOT NULL,
			aggregate_id VARCHAR(128) NOT NULL, payload JSON NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		`CREATE TABLE ` + e.dedupe + ` (event_id VARCHAR(64) NOT NULL, consumer_name VARCHAR(128) NOT NULL,
			processed_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (event_id, consumer_name))`,
	} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	if err := e.prepublish(ctx, o.events, o.aggs); err != nil {
		return 0, fmt.Errorf("pre-publish: %w", err)
	}
	elapsed, err := inboxContenders[name](ctx, e, o)
	if err != nil {
		return 0, err
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.biz).Scan(&n); err != nil {
		return 0, err
	}
	if n != o.events {
		return 0, fmt.Errorf("business table holds %d rows for %d events", n, o.events)
	}
	return float64(o.events) / elapsed.Seconds(), nil
}

// prepublish sends the events through txbox's own NATS publisher, so they
// are what a relay delivers.
func (e *inboxEnv) prepublish(ctx context.Context, events, aggs int) error {
	pub, err := natsbroker.Open(ctx, e.natsU, natsbroker.Options{Stream: e.stream, Connection: natsbroker.Connection{Logger: quiet()}})
	if err != nil {
		return err
	}
	defer pub.Close()
	const chunk = 1000
	for i := 0; i < events; i += chunk {
		msgs := make([]broker.Message, 0, chunk)
		for j := i; j < min(events, i+chunk); j++ {
			ev, err := txbox.NewEvent("Order", fmt.Sprintf("order-%d", j%aggs), "OrderCreated", payloadFor(j))
			if err != nil {
				return err
			}
			msgs = append(msgs, broker.Message{Event: ev, Topic: e.prefix + ".Order.OrderCreated", Source: "bench"})
		}
		for _, err := range pub.Publish(ctx, msgs) {
			if err != nil {
				return err
			}
		}
	}
	if n := e.storedMsgs(ctx); int(n) != events {
		return fmt.Errorf("stream holds %d of %d events", n, events)
	}
	return nil
}

func inboxTxbox(ctx context.Context, e *inboxEnv, o inboxOpts, txBatch int) (time.Duration, error) {
	sub, err := natsbroker.OpenSubscriber(ctx, e.natsU, natsbroker.SubscriberOptions{Stream: e.stream, Durable: "bench-txbox", AckWait: 30 * time.Second, Connection: natsbroker.Connection{Logger: quiet()}})
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	st, err := postgres.New(e.pool, postgres.Options{Tables: e.tables, Logger: quiet()})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	c, err := inbox.New(st, inbox.Config{
		Name:       "bench",
		Subscriber: sub,
		BatchSize:  o.batch,
		TxBatch:    txBatch,
		Logger:     quiet(),
	}, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+e.biz+` `+bizCols, ev.ID, ev.AggregateID, string(ev.Payload))
		return err
	})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(rctx) }()
	for ctrs := c.Stats(); ctrs.Processed < int64(o.events); ctrs = c.Stats() {
		if n := ctrs.Failed + ctrs.Parked + ctrs.Undecodable; n > 0 {
			cancel()
			<-done
			return 0, fmt.Errorf("inbox: %d failed, %d parked, %d undecodable", ctrs.Failed, ctrs.Parked, ctrs.Undecodable)
		}
		if time.Since(start) > o.timeout {
			cancel()
			<-done
			return 0, fmt.Errorf("timed out: %d of %d processed", ctrs.Processed, o.events)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	return elapsed, <-done
}

func inboxHandwritten(ctx context.Context, e *inboxEnv, o inboxOpts) (time.Duration, error) {
	cons, err := e.js.CreateOrUpdateConsumer(ctx, e.stream, jetstream.ConsumerConfig{
		Durable:       "bench-raw",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
	})
	if err != nil {
		return 0, err
	}
	handle := func(m jetstream.Msg) error {
		h := m.Headers()
		id, agg := h.Get(jetstream.MsgIDHeader), h.Get("ce-subject")
		if id == "" || agg == "" {
			return fmt.Errorf("message without id or subject: %v", h)
		}
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO `+e.dedupe+` (event_id, consumer_name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, "bench")
			if err != nil || tag.RowsAffected() == 0 {
				return err // a duplicate: commit nothing new, ack it
			}
			_, err = tx.Exec(ctx, `INSERT INTO `+e.biz+` `+bizCols, id, agg, string(m.Data()))
			return err
		})
		if err != nil {
			return err
		}
		if o.doubleAck {
			return m.DoubleAck(ctx)
		}
		return m.Ack()
	}
	start := time.Now()
	for done := 0; done < o.events; {
		batch, err := cons.FetchNoWait(o.batch)
		if err != nil {
			return 0, err
		}
		n := 0
		for m := range batch.Messages() {
			if err := handle(m); err != nil {
				return 0, err
			}
			n++
		}
		if err := batch.Error(); err != nil {
			return 0, err
		}
		done += n
		if n == 0 {
			if time.Since(start) > o.timeout {
				return 0, fmt.Errorf("timed out: %d of %d processed", done, o.events)
			}
			// Nothing ready: wait for the next message like a long poll.
			b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				return 0, err
			}
			for m := range b.Messages() {
				if err := handle(m); err != nil {
					return 0, err
				}
				done++
			}
			if err := b.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}
