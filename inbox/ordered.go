// Ordered delivery (Config.Ordered): a delivery whose predecessor has not
// been applied waits, unacknowledged, instead of failing.

package inbox

import (
	"context"
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
