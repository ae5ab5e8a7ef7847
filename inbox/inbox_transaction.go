// The inbox transaction: insert-if-absent, version guard, handler and
// processed mark commit together, or nothing does.

package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

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
	if c.ownDown() {
		// The consumer's database was found down in this round: this event
		// would meet it too.
		return false, c.sendBack(ev.ID)
	}
	began := time.Now()
	tx, native, commit, rollback, err := c.db.begin(ctx)
	if err != nil {
		return false, c.storeFailed(ev, inBegin, err, 0)
	}
	st := c.apply(ctx, tx, native, ev, false)
	if st.kind == stepCommit {
		err := commit()
		c.obs.txDone(began)
		if err != nil {
			return false, c.storeFailed(ev, inCommit, err, 0)
		}
	} else {
		_ = rollback()
		c.obs.txDone(began)
	}
	return c.settleStep(ctx, ev, st, again, canWait)
}

// stepKind is what the inbox transaction decided for one event.
type stepKind int

const (
	stepCommit  stepKind = iota // processed or skipped as stale: commit, then acknowledge
	stepAck                     // duplicate or parked: nothing to commit; acknowledge
	stepFail                    // handler error or a gap: roll back, record the attempt
	stepOutage                  // the handler met an outage: roll back, redeliver, record nothing
	stepRefused                 // the store refuses the event's data: roll back, park it
	stepInfra                   // any other store error: roll back, redeliver
)

type step struct {
	kind     stepKind
	attempts int    // failed attempts before this one
	err      error  // the handler's, the gap's, or the store's
	where    string // stepInfra: the statement that failed ("": logged already, or none)
	behind   bool   // held back, unapplied, behind a failed event of its aggregate
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
		if errors.Is(err, txbox.ErrInvalidEvent) {
			// The store refuses this event's data and always will; any
			// other error (connection, deadlock) is redelivered.
			c.log.Warn("inbox acquire failed", eventAttrs(ev, "err", err)...)
			return step{kind: stepRefused, err: err}
		}
		return step{kind: stepInfra, err: err, where: inAcquire}
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
			return step{kind: stepInfra, err: err, where: inGuard}
		case gap != nil:
			return step{kind: stepFail, attempts: attempts, err: gap, gap: true}
		case stale != "":
			if err := c.dialect.InboxDone(ctx, tx, c.cfg.Name, ev.ID, txbox.StatusSkipped, stale); err != nil {
				return step{kind: stepInfra, err: err, where: inDone}
			}
			return step{kind: stepCommit, stale: stale}
		}
	}
	if herr := c.safeHandle(ctx, native, ev); herr != nil {
		if c.isOutage(herr) {
			// Its database (or a broker) is down, not the event wrong: no
			// attempt is spent, however long the outage lasts.
			return step{kind: stepOutage, err: herr}
		}
		return step{kind: stepFail, attempts: attempts, err: herr}
	}
	if !marked {
		if err := c.dialect.InboxDone(ctx, tx, c.cfg.Name, ev.ID, txbox.StatusProcessed, ""); err != nil {
			return step{kind: stepInfra, err: err, where: inDone}
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
		c.outageOver(ev.ID)
		return true, 0
	case stepAck:
		if st.dup {
			c.ctrs.Duplicates.Add(1)
		}
		c.outageOver(ev.ID)
		return true, 0
	case stepFail:
		if st.gap && canWait {
			return false, waitMarker
		}
		return c.fail(ctx, ev, st.attempts, st.err, again)
	case stepOutage:
		c.log.Debug("handler met an outage; no attempt spent", eventAttrs(ev, "err", st.err)...)
		return false, c.outageWait(ev.ID, inHandler, st.err)
	case stepRefused:
		return c.parkRefused(ctx, ev, st.err)
	default:
		if st.where == "" {
			return false, c.backoff(1)
		}
		return false, c.storeFailed(ev, st.where, st.err, 0)
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
			c.ctrs.Held.Add(1)
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
		return false, c.storeFailed(ev, inRecord, err, c.backoff(prior+1))
	}
	attempts, parked, err := c.dialect.InboxFail(ctx, tx, c.cfg.Name, ev, herr.Error(), c.cfg.MaxAttempts, again)
	if err == nil {
		err = commit()
	} else {
		_ = rollback()
	}
	if err != nil {
		return false, c.storeFailed(ev, inRecord, err, c.backoff(prior+1))
	}
	c.outageOver(ev.ID)
	if parked {
		c.ctrs.Parked.Add(1)
		c.log.Warn("event parked after its last attempt", eventAttrs(ev, "attempts", attempts, "err", herr)...)
		return true, 0
	}
	c.log.Debug("handler failed, will retry", eventAttrs(ev, "attempt", attempts, "err", herr)...)
	return false, c.backoff(attempts)
}
