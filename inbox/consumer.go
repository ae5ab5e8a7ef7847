// Package inbox is the consume side: each event's handler runs in a database
// transaction together with an inbox row keyed by (event_id, consumer_name),
// so a redelivered event changes nothing twice.
//
// New sets a consumer up from the store that holds the inbox table, with its
// name, its subscriber and the handler, which gets the store's own
// transaction (pgx.Tx, *sql.Tx). For each delivery the consumer runs the
// inbox transaction: begin; insert-if-absent; a
// duplicate is acknowledged and skipped; else the handler runs; the row is
// marked processed; commit; only then is the broker acknowledged. (With
// PostgreSQL the insert writes the row already marked processed, so a first
// delivery costs one inbox statement besides the handler's; and an adapter
// that can, NATS, sends the ack without waiting for the broker to confirm
// it: a lost ack is a redelivery, which the inbox absorbs.) A handler
// error rolls everything back, the attempt and its error are recorded in a
// short transaction of their own, and the event is redelivered with backoff;
// after MaxAttempts it is parked (DEAD) and acknowledged so the stream keeps
// flowing, until an operator replays it. An outage is not the event's
// failure: when the consumer's database, or one the handler needs, is
// unavailable, the delivery is sent back without spending an attempt (see
// Config.MaxAttempts), and the outage is logged when it starts and when it
// ends.
package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/backoff"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Consumer applies events exactly once per consumer name.
type Consumer struct {
	cfg     Config
	dialect store.InboxDialect // the store's inbox SQL
	admin   store.InboxAdmin   // where operators' replay requests are found
	log     *slog.Logger
	db      txDB
	handle  func(ctx context.Context, native any, e txbox.Event) error
	ctrs    counters
	held    map[string]held // Ordered: deliveries waiting for a predecessor; Run's goroutine only
	// nextRecheck is when the held deliveries are next tried again
	// (recheckHeld).
	nextRecheck time.Time
	obs         *observer
	out         outage // the outage in progress, if any

	// Optional capabilities of the dialect (the PostgreSQL store's has both).
	acqDone  store.InboxProcessedAcquirer
	batchIns store.InboxBatchInserter
}

// txDB begins transactions on the consumer's database; native is the
// driver's own transaction (*sql.Tx or pgx.Tx) handed to the handler.
// beginShared begins a transaction for many events (TxBatch), with the
// savepoints that keep them apart.
type txDB interface {
	begin(ctx context.Context) (tx store.Tx, native any, commit, rollback func() error, err error)
	beginShared(ctx context.Context) (tx store.Tx, native any, sp savepoints, commit, rollback func() error, err error)
}

// savepoints gives each event of a shared transaction a savepoint: mark
// starts the next event's (releasing the previous one), undo rolls back to
// the current one. An error from either leaves the transaction unusable.
type savepoints interface {
	mark(ctx context.Context) error
	undo(ctx context.Context) error
}

func newConsumer(cfg Config, d store.InboxDialect, admin store.InboxAdmin, db txDB, h func(context.Context, any, txbox.Event) error) (*Consumer, error) {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, log: cfg.Logger.With("consumer", cfg.Name), dialect: d, admin: admin, db: db, handle: h, held: map[string]held{}}
	if aw, ok := cfg.Subscriber.(broker.AckWaiter); ok && cfg.Ordered && aw.AckWait() > 0 && c.cfg.HoldFor > aw.AckWait()/2 {
		// Held past the ack wait, a delivery is handed out again while it
		// is held, to this process or another, and the two copies wait
		// side by side.
		c.cfg.HoldFor = aw.AckWait() / 2
		c.log.Info("inbox: HoldFor lowered to half the subscriber's ack wait", "hold_for", c.cfg.HoldFor, "ack_wait", aw.AckWait())
	}
	c.out.up.Store(true)
	c.obs = newObserver(c)
	c.acqDone, _ = d.(store.InboxProcessedAcquirer)
	c.batchIns, _ = d.(store.InboxBatchInserter)
	return c, nil
}

// Run consumes until ctx ends; the delivery in hand is finished first.
func (c *Consumer) Run(ctx context.Context) error {
	c.log.Info("inbox consumer started", "batch", c.cfg.BatchSize, "max_attempts", c.cfg.MaxAttempts, "version_guard", c.cfg.VersionGuard)
	defer c.log.Info("inbox consumer stopped")
	nextReplay := time.Now()
	for ctx.Err() == nil {
		if c.admin != nil && time.Now().After(nextReplay) {
			c.replays(context.WithoutCancel(ctx))
			nextReplay = time.Now().Add(c.cfg.ReplayInterval)
		}
		wait := c.cfg.ReplayInterval
		if len(c.held) > 0 {
			wait = min(wait, recheckEvery) // held deliveries are tried again meanwhile
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		ds, err := c.cfg.Subscriber.Receive(rctx, c.cfg.BatchSize)
		cancel()
		if err != nil {
			c.recheckHeld(context.WithoutCancel(ctx))
			c.expireHeld(context.WithoutCancel(ctx), ctx.Err() != nil)
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				c.log.Warn("receive failed", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		c.handleBatch(context.WithoutCancel(ctx), ds)
		if c.ownDown() {
			// The consumer's database is down: every delivery of the round
			// was sent back; the next receive would only send more back.
			sleep(ctx, c.out.own)
		}
	}
	c.expireHeld(context.WithoutCancel(ctx), true)
	return nil
}

// handleBatch processes deliveries in order. Once an event of an aggregate
// fails, the later events of that aggregate in the batch are sent back too,
// unprocessed, so they do not overtake it.
func (c *Consumer) handleBatch(ctx context.Context, ds []broker.Delivery) {
	c.newRound()
	if c.cfg.TxBatch > 1 {
		c.handleSharedTx(ctx, ds)
		return
	}
	blocked := map[string]time.Duration{}
	for _, d := range ds {
		ev, err := decode(d)
		if err != nil {
			c.parkUndecodable(ctx, d, err)
			continue
		}
		key := ev.AggregateType + "\x00" + ev.AggregateID
		if c.cfg.Ordered && ev.AggregateVersion > 0 {
			// The version check orders these; holding back a later event
			// here could hold back the very predecessor it waits for.
			key = ""
		}
		if delay, ok := blocked[key]; ok && key != "" {
			c.settle(ctx, d, false, delay)
			continue
		}
		ack, delay := c.run(ctx, ev, txbox.StatusRetry, c.cfg.Ordered)
		if delay == waitMarker {
			c.hold(ctx, ev, d)
			continue
		}
		if !ack && key != "" {
			blocked[key] = delay
		}
		c.settle(ctx, d, ack, delay)
		if ack {
			c.releaseSuccessors(ctx, ev)
		}
	}
	c.recheckHeld(ctx)
	c.expireHeld(ctx, false)
}

func (c *Consumer) settle(ctx context.Context, d broker.Delivery, ack bool, delay time.Duration) {
	var err error
	if a, ok := d.(broker.AsyncAcker); ok && ack {
		err = a.AckAsync()
	} else if ack {
		err = d.Ack(ctx)
	} else {
		err = d.Nak(ctx, delay)
	}
	if err != nil {
		// The broker redelivers after its ack wait; the inbox absorbs it.
		c.log.Warn("settling delivery failed", "ack", ack, "err", err)
	}
}

// parkUndecodable keeps a message that is not a txbox event in the inbox as
// DEAD, with the reason and the raw message, and acknowledges it: it is not
// lost, and it does not block the stream.
func (c *Consumer) parkUndecodable(ctx context.Context, d broker.Delivery, cause error) {
	raw := d.Raw()
	sum := sha256.New()
	sum.Write([]byte(raw.Topic))
	for _, k := range sortedKeys(raw.Headers) { // one id for every redelivery
		sum.Write([]byte(k + "\x00" + raw.Headers[k] + "\x00"))
	}
	sum.Write(raw.Body)
	id := raw.ID
	if !usableID(id) {
		id = "raw-" + hex.EncodeToString(sum.Sum(nil))[:40]
	}
	payload, _ := json.Marshal(map[string]any{"topic": raw.Topic, "headers": raw.Headers, "body": string(raw.Body)})
	ev := txbox.Event{ID: id, Type: store.UndecodableType, AggregateType: "unknown", AggregateID: sqlstore.Truncate(raw.Topic, 128), Payload: payload}
	if c.ownDown() {
		c.settle(ctx, d, false, c.sendBack(id))
		return
	}
	tx, _, commit, rollback, err := c.db.begin(ctx)
	if err == nil {
		_, _, err = c.dialect.InboxFail(ctx, tx, c.cfg.Name, ev, "undecodable: "+cause.Error(), 1, txbox.StatusRetry)
		if err == nil {
			err = commit()
		} else {
			_ = rollback()
		}
	}
	if err != nil {
		// It comes back, and is parked then.
		c.settle(ctx, d, false, c.storeFailed(ev, inPark, err, 0))
		return
	}
	c.outageOver(id)
	c.ctrs.Undecodable.Add(1)
	c.log.Warn("undecodable message parked", "inbox_id", id, "topic", raw.Topic, "err", cause)
	c.settle(ctx, d, true, 0)
}

// replays runs the events an operator asked to replay. Their broker
// messages were acknowledged when they were parked, so the inbox itself
// carries them: a failure sets them back to REPLAY, not RETRY.
func (c *Consumer) replays(ctx context.Context) {
	c.newRound()
	rows, err := c.admin.InboxList(ctx, store.InboxFilter{Consumer: c.cfg.Name, Status: txbox.StatusReplay, Limit: c.cfg.BatchSize})
	if err != nil {
		if c.isOutage(err) {
			c.outageMet(inReplays, err) // an idle consumer learns of it here
		} else {
			c.log.Warn("looking for replays failed", "err", err)
		}
		return
	}
	c.outageOver("")
	for _, r := range rows {
		if ack, _ := c.process(ctx, r.Event, txbox.StatusReplay); ack {
			c.ctrs.Replayed.Add(1)
		}
	}
}

func (c *Consumer) backoff(attempt int) time.Duration {
	return backoff.Delay(attempt, c.cfg.BackoffBase, c.cfg.BackoffMax)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
