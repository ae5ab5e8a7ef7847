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
// flowing, until an operator replays it.
package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	obs     *observer

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
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ReplayInterval)
		ds, err := c.cfg.Subscriber.Receive(rctx, c.cfg.BatchSize)
		cancel()
		if err != nil {
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
	}
	c.expireHeld(context.WithoutCancel(ctx), true)
	return nil
}

// handleBatch processes deliveries in order. Once an event of an aggregate
// fails, the later events of that aggregate in the batch are sent back too,
// unprocessed, so they do not overtake it.
func (c *Consumer) handleBatch(ctx context.Context, ds []broker.Delivery) {
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
	c.expireHeld(ctx, false)
}

// held is a delivery waiting, unacknowledged, for its predecessor. If the
// process dies the broker redelivers it; nothing is written for it.
type held struct {
	d     broker.Delivery
	ev    txbox.Event
	since time.Time
}

func heldKey(ev txbox.Event, version int64) string {
	return ev.AggregateType + "\x00" + ev.AggregateID + "\x00" + strconv.FormatInt(version, 10)
}

// hold keeps an Ordered delivery whose predecessor is missing, so that it
// runs the moment the predecessor commits instead of after a redelivery
// round. Past MaxHeld it is sent back instead.
func (c *Consumer) hold(ctx context.Context, ev txbox.Event, d broker.Delivery) {
	c.ctrs.Gaps.Add(1)
	k := heldKey(ev, ev.AggregateVersion)
	if old, ok := c.held[k]; ok {
		c.settle(ctx, old.d, false, c.cfg.BackoffBase) // a redelivered copy replaces it
	} else if len(c.held) >= c.cfg.MaxHeld {
		c.settle(ctx, d, false, c.cfg.BackoffBase)
		return
	}
	c.held[k] = held{d: d, ev: ev, since: time.Now()}
}

// releaseSuccessors runs the held successors of an applied event, in order.
func (c *Consumer) releaseSuccessors(ctx context.Context, ev txbox.Event) {
	for c.cfg.Ordered && ev.AggregateVersion > 0 {
		k := heldKey(ev, ev.AggregateVersion+1)
		h, ok := c.held[k]
		if !ok {
			return
		}
		delete(c.held, k)
		ack, delay := c.run(ctx, h.ev, txbox.StatusRetry, true)
		if delay == waitMarker {
			c.held[k] = h
			return
		}
		c.settle(ctx, h.d, ack, delay)
		if !ack {
			return
		}
		ev = h.ev
	}
}

// expireHeld sends back deliveries held longer than HoldFor (all of them
// when all is set), before the broker's ack wait would redeliver them anyway.
func (c *Consumer) expireHeld(ctx context.Context, all bool) {
	for k, h := range c.held {
		if all || time.Since(h.since) > c.cfg.HoldFor {
			delete(c.held, k)
			c.settle(ctx, h.d, false, c.cfg.BackoffBase)
		}
	}
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

// process runs the inbox transaction for one event. It reports whether the
// delivery is to be acknowledged, or redelivered after delay.
func (c *Consumer) process(ctx context.Context, ev txbox.Event, again txbox.Status) (ack bool, delay time.Duration) {
	return c.run(ctx, ev, again, false)
}

// waitMarker is the delay run reports for "hold this delivery until its
// predecessor is applied": a value no backoff produces.
const waitMarker = time.Duration(-1)

// run is process; with canWait, an Ordered event whose predecessor is
// missing is neither failed nor settled, and run returns waitMarker.
func (c *Consumer) run(ctx context.Context, ev txbox.Event, again txbox.Status, canWait bool) (ack bool, delay time.Duration) {
	began := time.Now()
	tx, native, commit, rollback, err := c.db.begin(ctx)
	if err != nil {
		c.log.Warn("begin failed", eventAttrs(ev, "err", err)...)
		return false, c.backoff(1)
	}
	st := c.apply(ctx, tx, native, ev, false)
	if st.kind == stepCommit {
		err := commit()
		c.obs.txDone(began)
		if err != nil {
			c.log.Warn("commit failed", eventAttrs(ev, "err", err)...)
			return false, c.backoff(1)
		}
	} else {
		_ = rollback()
		c.obs.txDone(began)
	}
	return c.settleStep(ctx, ev, st, again, canWait)
}

// handleSharedTx is handleBatch with TxBatch > 1: up to TxBatch events per
// transaction, each under its own savepoint.
func (c *Consumer) handleSharedTx(ctx context.Context, ds []broker.Delivery) {
	type item struct {
		d  broker.Delivery
		ev txbox.Event
	}
	var items []item
	for _, d := range ds {
		ev, err := decode(d)
		if err != nil {
			c.parkUndecodable(ctx, d, err)
			continue
		}
		items = append(items, item{d, ev})
	}
	for len(items) > 0 {
		n := min(len(items), c.cfg.TxBatch)
		chunk := items[:n]
		items = items[n:]
		evs := make([]txbox.Event, n)
		for i, it := range chunk {
			evs[i] = it.ev
		}
		steps := c.applyShared(ctx, evs)
		for i, it := range chunk {
			ack, delay := c.settleStep(ctx, it.ev, steps[i], txbox.StatusRetry, false)
			c.settle(ctx, it.d, ack, delay)
		}
	}
}

// applyShared runs events in one transaction, each under a savepoint, and
// commits. When the transaction as a whole fails, every event is sent back.
//
// With a dialect that can (postgres), the inbox rows of all first
// deliveries are inserted, PROCESSED, by one statement before the first
// savepoint; the rows of events that then fail or are held back are deleted
// again before the commit. Each event then costs its savepoint and its
// handler, and with pgx the savepoint travels with the handler's first
// statement.
func (c *Consumer) applyShared(ctx context.Context, evs []txbox.Event) []step {
	steps := make([]step, len(evs))
	all := func(err error) []step {
		for i := range steps {
			steps[i] = step{kind: stepInfra, err: err}
		}
		return steps
	}
	began := time.Now()
	defer c.obs.txDone(began)
	tx, native, sp, commit, rollback, err := c.db.beginShared(ctx)
	if err != nil {
		return all(err)
	}
	var fresh []bool
	if c.batchIns != nil {
		if fresh, err = c.batchIns.InboxInsertProcessed(ctx, tx, c.cfg.Name, evs); err != nil {
			// One event the store refuses fails the whole statement: start
			// over without it, and let each event find out on its own.
			c.log.Debug("inserting a batch of inbox rows failed; one at a time", "events", len(evs), "err", err)
			_ = rollback()
			fresh = nil
			if tx, native, sp, commit, rollback, err = c.db.beginShared(ctx); err != nil {
				return all(err)
			}
		}
	}
	var forget []string
	failed := map[string]bool{}
	for i, ev := range evs {
		inserted := fresh != nil && fresh[i]
		key := ev.AggregateType + "\x00" + ev.AggregateID
		if failed[key] {
			// An earlier event of this aggregate failed: do not overtake it.
			steps[i] = step{kind: stepInfra, err: errors.New("held back behind a failed event of its aggregate")}
			if inserted {
				forget = append(forget, ev.ID)
			}
			continue
		}
		if err := sp.mark(ctx); err != nil {
			_ = rollback()
			return all(err)
		}
		steps[i] = c.apply(ctx, tx, native, ev, inserted)
		if k := steps[i].kind; k != stepCommit && k != stepAck {
			if err := sp.undo(ctx); err != nil {
				_ = rollback()
				return all(err)
			}
			failed[key] = true
			if inserted {
				forget = append(forget, ev.ID)
			}
		}
	}
	if len(forget) > 0 {
		if err := c.batchIns.InboxForget(ctx, tx, c.cfg.Name, forget); err != nil {
			_ = rollback()
			return all(err)
		}
	}
	if err := commit(); err != nil {
		c.log.Warn("commit of a shared transaction failed", "events", len(evs), "err", err)
		return all(err)
	}
	return steps
}

// stepKind is what the inbox transaction decided for one event.
type stepKind int

const (
	stepCommit  stepKind = iota // processed or skipped as stale: commit, then acknowledge
	stepAck                     // duplicate or parked: nothing to commit; acknowledge
	stepFail                    // handler error or a gap: roll back, record the attempt
	stepRefused                 // the store refuses the event's data: roll back, park it
	stepInfra                   // any other store error: roll back, redeliver
)

type step struct {
	kind     stepKind
	attempts int   // failed attempts before this one
	err      error // the handler's, the gap's, or the store's
	stale    string
	dup      bool
	gap      bool
}

// apply is the inbox transaction's body for one event, on tx: the
// insert-if-absent, the version guard, the handler and the processed mark.
// inserted says the row was inserted, PROCESSED, already (applyShared).
// It never commits or rolls back; the caller does, per what it returns.
func (c *Consumer) apply(ctx context.Context, tx store.Tx, native any, ev txbox.Event, inserted bool) step {
	var state store.InboxState
	var attempts int
	var err error
	marked := true // the row says PROCESSED already, to be rolled back if the handler fails
	switch {
	case inserted:
		state = store.InboxFresh
	case c.acqDone != nil:
		state, attempts, err = c.acqDone.InboxAcquireProcessed(ctx, tx, c.cfg.Name, ev)
	default:
		marked = false
		state, attempts, err = c.dialect.InboxAcquire(ctx, tx, c.cfg.Name, ev)
	}
	if err != nil {
		c.log.Warn("inbox acquire failed", eventAttrs(ev, "err", err)...)
		if errors.Is(err, txbox.ErrInvalidEvent) {
			// The store refuses this event's data and always will; any
			// other error (connection, deadlock) is redelivered.
			return step{kind: stepRefused, err: err}
		}
		return step{kind: stepInfra, err: err}
	}
	switch state {
	case store.InboxDuplicate:
		return step{kind: stepAck, dup: true}
	case store.InboxParked:
		return step{kind: stepAck}
	}
	if c.cfg.VersionGuard && ev.AggregateVersion > 0 {
		stale, gap, err := c.checkVersion(ctx, tx, ev)
		switch {
		case err != nil && errors.Is(err, txbox.ErrInvalidEvent): // as for InboxAcquire
			return step{kind: stepRefused, err: err}
		case err != nil:
			return step{kind: stepInfra, err: err}
		case gap != nil:
			return step{kind: stepFail, attempts: attempts, err: gap, gap: true}
		case stale != "":
			if err := c.dialect.InboxDone(ctx, tx, c.cfg.Name, ev.ID, txbox.StatusSkipped, stale); err != nil {
				return step{kind: stepInfra, err: err}
			}
			return step{kind: stepCommit, stale: stale}
		}
	}
	if herr := c.safeHandle(ctx, native, ev); herr != nil {
		return step{kind: stepFail, attempts: attempts, err: herr}
	}
	if !marked {
		if err := c.dialect.InboxDone(ctx, tx, c.cfg.Name, ev.ID, txbox.StatusProcessed, ""); err != nil {
			return step{kind: stepInfra, err: err}
		}
	}
	return step{kind: stepCommit}
}

// settleStep turns a step whose transaction has ended into the delivery's
// fate: acknowledge, or redeliver after a delay (waitMarker: hold it).
func (c *Consumer) settleStep(ctx context.Context, ev txbox.Event, st step, again txbox.Status, canWait bool) (bool, time.Duration) {
	switch st.kind {
	case stepCommit:
		if st.stale != "" {
			c.ctrs.Stale.Add(1)
			c.log.Debug("stale event skipped", eventAttrs(ev, "version", ev.AggregateVersion, "note", st.stale)...)
		} else {
			c.ctrs.Processed.Add(1)
		}
		return true, 0
	case stepAck:
		if st.dup {
			c.ctrs.Duplicates.Add(1)
		}
		return true, 0
	case stepFail:
		if st.gap && canWait {
			return false, waitMarker
		}
		return c.fail(ctx, ev, st.attempts, st.err, again)
	case stepRefused:
		return c.parkRefused(ctx, ev, st.err)
	default:
		return false, c.backoff(1)
	}
}

// checkVersion runs the version guard in the handler's transaction. It
// returns a note when the event is stale, or an error when Ordered is on
// and the event's predecessor has not been applied yet. What it records is
// rolled back with the transaction when the handler fails.
func (c *Consumer) checkVersion(ctx context.Context, tx store.Tx, ev txbox.Event) (stale string, gap error, err error) {
	d, name, v := c.dialect, c.cfg.Name, ev.AggregateVersion
	if c.cfg.Ordered && v > 1 {
		// Recording v-1 succeeds only if the last applied version is below
		// v-1: then v-1 itself is missing. The transaction is rolled back.
		if _, ok, err := d.InboxVersion(ctx, tx, name, ev.AggregateType, ev.AggregateID, v-1); err != nil {
			return "", nil, err
		} else if ok {
			c.ctrs.Gaps.Add(1)
			return "", fmt.Errorf("waiting for version %d of %s/%s before applying version %d", v-1, ev.AggregateType, ev.AggregateID, v), nil
		}
	}
	last, ok, err := d.InboxVersion(ctx, tx, name, ev.AggregateType, ev.AggregateID, v)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return fmt.Sprintf("stale: version %d is not above the last applied %d", v, last), nil, nil
	}
	return "", nil, nil
}

func (c *Consumer) safeHandle(ctx context.Context, native any, ev txbox.Event) (err error) {
	ctx, end := c.obs.handlerStart(ctx, ev)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
		end(err)
	}()
	return c.handle(ctx, native, ev)
}

// fail records a failed attempt in a transaction of its own: the handler's
// was rolled back, and with it anything it wrote.
func (c *Consumer) fail(ctx context.Context, ev txbox.Event, prior int, herr error, again txbox.Status) (bool, time.Duration) {
	c.ctrs.Failed.Add(1)
	tx, _, commit, rollback, err := c.db.begin(ctx)
	if err != nil {
		return false, c.backoff(prior + 1)
	}
	attempts, parked, err := c.dialect.InboxFail(ctx, tx, c.cfg.Name, ev, herr.Error(), c.cfg.MaxAttempts, again)
	if err == nil {
		err = commit()
	} else {
		_ = rollback()
	}
	if err != nil {
		c.log.Warn("recording a failed attempt failed", eventAttrs(ev, "err", err)...)
		return false, c.backoff(prior + 1)
	}
	if parked {
		c.ctrs.Parked.Add(1)
		c.log.Warn("event parked after its last attempt", eventAttrs(ev, "attempts", attempts, "err", herr)...)
		return true, 0
	}
	c.log.Debug("handler failed, will retry", eventAttrs(ev, "attempt", attempts, "err", herr)...)
	return false, c.backoff(attempts)
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
		c.log.Warn("parking an undecodable message failed; it will come back", "err", err)
		c.settle(ctx, d, false, c.backoff(1))
		return
	}
	c.ctrs.Undecodable.Add(1)
	c.log.Warn("undecodable message parked", "inbox_id", id, "topic", raw.Topic, "err", cause)
	c.settle(ctx, d, true, 0)
}

// replays runs the events an operator asked to replay. Their broker
// messages were acknowledged when they were parked, so the inbox itself
// carries them: a failure sets them back to REPLAY, not RETRY.
func (c *Consumer) replays(ctx context.Context) {
	rows, err := c.admin.InboxList(ctx, store.InboxFilter{Consumer: c.cfg.Name, Status: txbox.StatusReplay, Limit: c.cfg.BatchSize})
	if err != nil {
		c.log.Warn("looking for replays failed", "err", err)
		return
	}
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
