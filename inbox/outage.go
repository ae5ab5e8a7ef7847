// Outages: a delivery that fails because a database is unavailable (the
// consumer's own, or one its handler needs) is not the event's failure. It
// spends no attempt, so an outage longer than the retry schedule parks
// nothing; the delivery is sent back with a delay that grows while the
// outage lasts, and the outage is logged once when it starts and once when
// it ends instead of once per event.

package inbox

import (
	"sync/atomic"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/backoff"
	"github.com/txbox/txbox/store"
)

// outageBackoffMax caps the delay of a delivery sent back for an outage
// (below BackoffMax when that is lower): the outage's end is found by a
// delivery sent back for it coming through, so the wait after the database
// is back is at most this long, however long the outage was.
const outageBackoffMax = 30 * time.Second

// Where a failure met the outage: the handler, or one of the inbox's own
// statements, named as the log lines name them.
const (
	inHandler = "handler"
	inBegin   = "begin"
	inCommit  = "commit"
	inAcquire = "inbox acquire"
	inGuard   = "version guard"
	inDone    = "inbox done"
	inRecord  = "recording a failed attempt"
	inPark    = "parking an undecodable message"
	inShared  = "shared transaction"
	inReplays = "looking for replays"
)

// outageQuiet is the least time without a delivery meeting the outage
// after which any event getting through ends it: with short delays (tens
// of milliseconds) twice the longest one is less than a loaded machine
// may take to redeliver, and the outage would end and start again.
const outageQuiet = 5 * time.Second

// maxWaiting bounds the event ids an outage remembers: enough to see one
// of them come back, without holding a whole backlog's ids.
const maxWaiting = 10000

// outage is the consumer's view of an outage in progress. Only Run's
// goroutine changes it; up is read by the metrics as well.
type outage struct {
	up     atomic.Bool // false from the first failure that met the outage until it ends
	since  time.Time   // zero: no outage
	waited int64       // deliveries sent back since it started
	streak int         // rounds of deliveries that met it: the delay's exponent
	round  uint64      // the current round (a receive's deliveries, or a pass over replays)
	seen   uint64      // the last round that met it
	// waiting holds the events sent back for the outage (up to maxWaiting).
	// The outage ends when one of them gets through: another event
	// getting through proves nothing when the database that is down is
	// one only some events' handlers need. Empty while only the replay
	// poll met the outage: then anything that gets through ends it.
	waiting map[string]struct{}
	// last is when a delivery last met the outage, and longest the longest
	// delay one was sent back with. Once nothing met it for twice that
	// (and at least outageQuiet), every delivery sent back has had its time
	// to come back and get through, here or, on a broker that shares the
	// work, in another process: then any event that gets through ends it.
	last    time.Time
	longest time.Duration
	// own is the delay of the current round once one of the inbox's own
	// statements met the outage: the consumer's database is down for every
	// event, so the rest of the round is sent back without trying it, and
	// Run waits as long before it receives again.
	own time.Duration
}

// isOutage reports whether err is an outage rather than a failure of the
// event: wrapped as one, or recognised by the store's dialect.
func (c *Consumer) isOutage(err error) bool { return store.IsOutage(c.dialect, err) }

// newRound starts a round: the deliveries of one receive, or one pass over
// the replay requests.
func (c *Consumer) newRound() {
	c.out.round++
	c.out.own = 0
}

// outageWait records event id sent back because of an outage met in where,
// and returns its delay: BackoffBase doubled for every round that met the
// outage, at most min(BackoffMax, 30s), with jitter.
func (c *Consumer) outageWait(id, where string, err error) time.Duration {
	c.outageMet(where, err)
	o := &c.out
	if o.seen != o.round {
		o.seen = o.round
		o.streak++
	}
	d := backoff.Delay(o.streak, c.cfg.BackoffBase, min(c.cfg.BackoffMax, outageBackoffMax))
	c.waited(id, d)
	if where != inHandler && o.own == 0 {
		o.own = d
	}
	return d
}

func (c *Consumer) waited(id string, delay time.Duration) {
	o := &c.out
	o.waited++
	o.last, o.longest = time.Now(), max(o.longest, delay)
	c.ctrs.OutageWaits.Add(1)
	if len(o.waiting) < maxWaiting {
		o.waiting[id] = struct{}{}
	}
}

// outageMet starts the outage, unless one is in progress, with the one
// line that says so.
func (c *Consumer) outageMet(where string, err error) {
	o := &c.out
	if !o.since.IsZero() {
		return
	}
	o.since, o.waited, o.streak, o.waiting, o.longest = time.Now(), 0, 0, map[string]struct{}{}, 0
	o.up.Store(false)
	c.log.Warn("outage: deliveries are sent back without spending attempts until it ends", "in", where, "err", err)
}

// ownDown reports whether the consumer's own database was found down in
// this round.
func (c *Consumer) ownDown() bool { return c.out.own > 0 }

// sendBack records event id sent back untried because the consumer's own
// database is down, and returns its delay.
func (c *Consumer) sendBack(id string) time.Duration {
	c.waited(id, c.out.own)
	return c.out.own
}

// outageOver ends the outage, if any, when event id got through: its
// transaction committed, it was found a duplicate, or its failure was
// recorded. id "" is the replay poll, a read, which ends only an outage
// that no delivery has met, or none for a while (see outage.last).
func (c *Consumer) outageOver(id string) {
	o := &c.out
	if o.since.IsZero() {
		return
	}
	if _, ok := o.waiting[id]; !ok && len(o.waiting) > 0 && time.Since(o.last) <= max(2*o.longest, outageQuiet) {
		return
	}
	c.log.Info("outage over", "lasted", time.Since(o.since).Round(time.Millisecond), "deliveries_waited", o.waited)
	o.since, o.waiting = time.Time{}, nil
	o.up.Store(true)
}

// storeFailed is the delay of a delivery whose inbox statement (begin,
// acquire, the version guard, the processed mark, commit, recording an
// attempt) failed: none of these records an attempt. An outage waits as
// outages do; any other error (a deadlock, a serialization failure) is
// logged and retried after BackoffBase, or after retry when given.
func (c *Consumer) storeFailed(ev txbox.Event, where string, err error, retry time.Duration) time.Duration {
	if c.isOutage(err) {
		c.log.Debug("delivery waits for the outage to end", eventAttrs(ev, "in", where, "err", err)...)
		return c.outageWait(ev.ID, where, err)
	}
	c.log.Warn(where+" failed", eventAttrs(ev, "err", err)...)
	if retry > 0 {
		return retry
	}
	return c.backoff(1)
}
