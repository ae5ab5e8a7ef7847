package relay

import (
	"context"
	"time"

	"github.com/txbox/txbox/broker"
)

// publishRound hands one round of messages to the publisher, as the polling
// loop and DeliverOrdered both do: one span per message, the publish
// bounded by PublishTimeout (and by deadline, when set: a lease's end),
// the publish time counted, a miscounting publisher's results replaced,
// outages of the way out tracked (outage.go), and the outcome observed. created are the messages' rows' creation
// times, for the commit-to-publish metric.
func (r *Relay) publishRound(ctx context.Context, deadline time.Time, msgs []broker.Message, created []time.Time) []error {
	spans := r.startSpans(ctx, msgs)
	pubStart := time.Now()
	limit := pubStart.Add(r.cfg.PublishTimeout)
	if !deadline.IsZero() {
		limit = minTime(deadline, limit)
	}
	pctx, cancel := context.WithDeadline(ctx, limit)
	errs := r.cfg.Publisher.Publish(pctx, msgs)
	cancel()
	r.ctrs.PublishNanos.Add(int64(time.Since(pubStart)))
	if len(errs) != len(msgs) {
		errs = miscounted(r.log, len(errs), len(msgs))
	}
	endSpans(spans, errs)
	r.out.round(msgs, errs)
	r.obs.published(pubStart, created, errs)
	return errs
}
