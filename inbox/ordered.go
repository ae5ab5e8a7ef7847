// Ordered delivery (Config.Ordered): a delivery whose predecessor has not
// been applied waits, unacknowledged, instead of failing.

package inbox

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// held is a delivery waiting, unacknowledged, for its predecessor. If the
// process dies the broker redelivers it; nothing is written for it.
type held struct {
	d     broker.Delivery
	ev    txbox.Event
	since time.Time
	// retry is when recheckHeld may try it again: the wait doubles from
	// recheckEvery with each try that found its predecessor still missing.
	retry time.Time
	tries int
}

func heldKey(ev txbox.Event, version int64) string {
	return ev.AggregateType + "\x00" + ev.AggregateID + "\x00" + strconv.FormatInt(version, 10)
}

// hold keeps an Ordered delivery whose predecessor is missing, so that it
// runs the moment the predecessor commits instead of after a redelivery
// round. Past MaxHeld it is sent back instead.
func (c *Consumer) hold(ctx context.Context, ev txbox.Event, d broker.Delivery) {
	c.ctrs.Held.Add(1)
	k := heldKey(ev, ev.AggregateVersion)
	if _, ok := c.held[k]; ok {
		// A copy handed out again replaces the held one, unsettled: the
		// broker has given up on the first (its ack wait passed), and a
		// nak of it would, on a broker that settles by message (JetStream),
		// send the very message held here out once more.
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
		if !ok || !c.runHeld(ctx, k, h) {
			return
		}
		ev = h.ev
	}
}

// runHeld runs held delivery h (key k) and settles it; it reports whether
// it was applied. Still waiting for its predecessor, it stays held, and is
// tried again by recheckHeld after twice the wait of its last try.
func (c *Consumer) runHeld(ctx context.Context, k string, h held) bool {
	delete(c.held, k)
	ack, delay := c.run(ctx, h.ev, txbox.StatusRetry, true)
	if delay == waitMarker {
		h.tries++
		h.retry = time.Now().Add(min(recheckEvery<<min(h.tries, 10), c.cfg.HoldFor))
		c.held[k] = h
		c.ctrs.Held.Add(-1) // it was counted when first held
		return false
	}
	c.settle(ctx, h.d, ack, delay)
	return ack
}

// recheckEvery is how often the held deliveries are tried again. Several
// processes share one consumer name and the broker hands an aggregate's
// events to any of them: the predecessor a delivery waits for is often
// applied by another process, which cannot release it. Without a look of
// its own, the held delivery would wait until HoldFor sends it back and the
// broker hands it out again, to a process chosen at random, and a hot
// aggregate would advance by a few events per HoldFor.
const recheckEvery = 100 * time.Millisecond

// recheckMax bounds the aggregates tried in one recheck (each is a
// transaction), the longest-held first; the rest wait for the next one.
const recheckMax = 16

// recheckHeld tries again the lowest held version of each aggregate that
// has held deliveries: applied if its predecessor has been applied
// meanwhile (here or in another process), then its held successors in
// order; held on otherwise, to be tried after twice the wait (so that a
// long wait costs the database a few transactions, not ten a second).
func (c *Consumer) recheckHeld(ctx context.Context) {
	if len(c.held) == 0 || time.Now().Before(c.nextRecheck) || c.ownDown() {
		return
	}
	c.nextRecheck = time.Now().Add(recheckEvery)
	heads := map[string]string{} // aggregate -> key of its lowest held version
	for k, h := range c.held {
		agg := h.ev.AggregateType + "\x00" + h.ev.AggregateID
		if cur, ok := heads[agg]; !ok || h.ev.AggregateVersion < c.held[cur].ev.AggregateVersion {
			heads[agg] = k
		}
	}
	keys := make([]string, 0, len(heads))
	now := time.Now()
	for _, k := range heads {
		if !now.Before(c.held[k].retry) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return c.held[a].since.Compare(c.held[b].since) })
	for _, k := range keys[:min(len(keys), recheckMax)] {
		if h, ok := c.held[k]; ok && c.runHeld(ctx, k, h) {
			c.releaseSuccessors(ctx, h.ev)
		}
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
