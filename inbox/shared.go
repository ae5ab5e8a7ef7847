// Shared transactions (Config.TxBatch > 1): many events in one transaction,
// each under its own savepoint.

package inbox

import (
	"context"
	"errors"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

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
	// blocked holds the delay of each aggregate with an event sent back in
	// this batch: its later events go back with it, unapplied, so they do
	// not overtake it, in this transaction or a later one.
	blocked := map[string]time.Duration{}
	key := func(ev txbox.Event) string { return ev.AggregateType + "\x00" + ev.AggregateID }
	for len(items) > 0 {
		var chunk []item
		for len(items) > 0 && len(chunk) < c.cfg.TxBatch {
			it := items[0]
			items = items[1:]
			switch delay, ok := blocked[key(it.ev)]; {
			case ok:
				c.settle(ctx, it.d, false, delay)
			case c.ownDown():
				c.settle(ctx, it.d, false, c.sendBack(it.ev.ID))
			default:
				chunk = append(chunk, it)
			}
		}
		if len(chunk) == 0 {
			continue
		}
		evs := make([]txbox.Event, len(chunk))
		for i, it := range chunk {
			evs[i] = it.ev
		}
		steps := c.applyShared(ctx, evs)
		for i, it := range chunk {
			if delay, ok := blocked[key(it.ev)]; ok && steps[i].behind {
				c.settle(ctx, it.d, false, delay)
				continue
			}
			ack, delay := c.settleStep(ctx, it.ev, steps[i], txbox.StatusRetry, false)
			if !ack {
				if _, ok := blocked[key(it.ev)]; !ok {
					blocked[key(it.ev)] = delay
				}
			}
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
	// all sends every event back when the transaction as a whole failed:
	// each waits as for an outage when it is one; else the failure is
	// logged once, not once per event.
	all := func(where string, err error) []step {
		if !c.isOutage(err) {
			c.log.Warn(where+" of a shared transaction failed", "events", len(evs), "err", err)
			where = ""
		}
		for i := range steps {
			steps[i] = step{kind: stepInfra, err: err, where: where}
		}
		return steps
	}
	began := time.Now()
	defer c.obs.txDone(began)
	tx, native, sp, commit, rollback, err := c.db.beginShared(ctx)
	if err != nil {
		return all(inBegin, err)
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
				return all(inBegin, err)
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
			steps[i] = step{kind: stepInfra, err: errors.New("held back behind a failed event of its aggregate"), behind: true}
			if inserted {
				forget = append(forget, ev.ID)
			}
			continue
		}
		if err := sp.mark(ctx); err != nil {
			_ = rollback()
			return all(inShared, err)
		}
		steps[i] = c.apply(ctx, tx, native, ev, inserted)
		if k := steps[i].kind; k != stepCommit && k != stepAck {
			if err := sp.undo(ctx); err != nil {
				_ = rollback()
				return all(inShared, err)
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
			return all(inShared, err)
		}
	}
	if err := commit(); err != nil {
		return all(inCommit, err)
	}
	return steps
}
