package relay

import (
	"context"
	"errors"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/backoff"
	"github.com/txbox/txbox/store"
)

// Outcome is what DeliverOrdered did with the records it was given: the
// ids the broker confirmed and the records that can never be published.
type Outcome struct {
	Sent []int64
	Dead []store.Failure
}

// streamRetryCap bounds the wait between retries of a change stream: the
// database holds its log for as long as the stream waits, and a broker that
// comes back should be used within seconds, not after BackoffMax.
const streamRetryCap = 5 * time.Second

// maxRound bounds the messages of one round of DeliverOrdered.
const maxRound = 1000

// DeliverOrdered publishes records that arrive as an ordered stream (a
// change data capture reader: commit order) rather than from claims. Each
// message is built exactly as the polling loop builds it (topic, source,
// headers, trace context).
//
// A later event of an aggregate is never handed to the broker while an
// earlier one is unconfirmed (see roundPick); with a publisher that keeps
// per-key order in flight (broker.OrderedPipeliner) the broker receives the
// whole stream in commit order, failures aside.
//
// It returns only when every record is confirmed or dead, or when ctx ends
// (with ctx's error and a partial outcome the caller must not confirm): a
// stream cannot leave an event behind and move on, so after a retryable
// failure it waits (backoff capped at a few seconds) and publishes that
// event and the rest of its aggregate again, for as long as the broker is
// unavailable; events of other aggregates that the broker confirmed in the
// same round count as delivered. A permanent failure (invalid event,
// invalid destination, too big), or any other failure MaxAttempts times,
// is dead and the stream goes on. Nothing is written to the store:
// recording the outcome is the caller's.
func (r *Relay) DeliverOrdered(ctx context.Context, recs []store.Record) (Outcome, error) {
	var out outcome
	rest := make([]item, 0, len(recs))
	for _, rec := range recs {
		it, err := r.item(rec)
		if err != nil {
			out.failures = append(out.failures, r.failure(rec, err, true))
			continue
		}
		rest = append(rest, it)
	}
	attempts := map[int64]int{}
	result := func() Outcome { return Outcome{Sent: out.sent, Dead: out.failures} }
	for len(rest) > 0 {
		if err := ctx.Err(); err != nil {
			return result(), err
		}
		pick := r.roundPick(rest)
		msgs := make([]broker.Message, len(pick))
		created := make([]time.Time, len(pick))
		for i, at := range pick {
			msgs[i], created[i] = rest[at].msg, rest[at].rec.CreatedAt
		}
		spans := r.startSpans(ctx, msgs)
		pubStart := time.Now()
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		errs := r.cfg.Publisher.Publish(pctx, msgs)
		cancel()
		r.ctrs.PublishNanos.Add(int64(time.Since(pubStart)))
		if len(errs) != len(msgs) {
			errs = miscounted(r.log, len(errs), len(msgs))
		}
		endSpans(spans, errs)
		r.obs.published(pubStart, created, errs)
		var wait time.Duration
		rest, wait = r.settleOrdered(rest, pick, errs, attempts, &out)
		if wait > 0 && !sleep(ctx, wait, nil, nil) {
			return result(), ctx.Err()
		}
	}
	r.ctrs.Published.Add(int64(len(out.sent)))
	r.ctrs.Dead.Add(int64(len(out.failures)))
	return result(), nil
}

// roundPick chooses the events of one round, as indexes into the stream
// in stream order. With a publisher that keeps per-key order in flight it
// is the longest front of the stream in which an aggregate appears again
// only to continue its run to the same destination: the broker then gets
// the stream in commit order. With any other publisher it is the first
// event of each aggregate in the stream (up to maxRound): one unconfirmed
// event per aggregate, as the polling loop's lanes, so a round is not cut
// short by the first repeated aggregate; events of different aggregates may
// then reach the broker out of commit order, never two of one aggregate.
func (r *Relay) roundPick(rest []item) []int {
	seen := map[string]string{} // aggregate -> destination of its last event in the round
	var pick []int
	for i := 0; i < len(rest) && len(pick) < maxRound; i++ {
		k := laneKey(rest[i].rec)
		t, in := seen[k]
		switch {
		case !in:
			seen[k] = rest[i].msg.Topic
			pick = append(pick, i)
		case r.pipelined && t == rest[i].msg.Topic && len(pick) == i:
			pick = append(pick, i) // the front continues
		case r.pipelined:
			return pick
		}
	}
	return pick
}

// settleOrdered records the results of the picked events and returns what
// is left of the stream, in order, with how long to wait before the next
// round. A retryable failure keeps its event and every later picked event
// of its aggregate (confirmed or not: their copies are duplicates the inbox
// absorbs); the rest of the round is settled as it came back.
func (r *Relay) settleOrdered(rest []item, pick []int, errs []error, attempts map[int64]int, out *outcome) ([]item, time.Duration) {
	keep := make([]item, 0, len(rest)-len(pick))
	blocked := map[string]bool{}
	var wait time.Duration
	j := 0
	for i, it := range rest {
		if j >= len(pick) || pick[j] != i {
			keep = append(keep, it)
			continue
		}
		err := errs[j]
		j++
		k := laneKey(it.rec)
		if blocked[k] {
			keep = append(keep, it)
			continue
		}
		switch {
		case err == nil:
			out.sent = append(out.sent, it.rec.ID)
			delete(attempts, it.rec.ID)
		case errors.Is(err, txbox.ErrPermanent):
			out.failures = append(out.failures, r.failure(it.rec, err, true))
		default:
			attempts[it.rec.ID]++
			a := attempts[it.rec.ID]
			outage := errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded)
			if !outage && a >= r.cfg.MaxAttempts {
				rec := it.rec
				rec.RetryCount = a - 1
				out.failures = append(out.failures, r.failure(rec, err, false))
				continue
			}
			r.ctrs.Retried.Add(1)
			d := backoff.Delay(a, r.cfg.BackoffBase, min(r.cfg.BackoffMax, streamRetryCap))
			wait = max(wait, d)
			blocked[k] = true
			keep = append(keep, it)
			r.log.Debug("stream publish failed, will retry", eventAttrs(it.rec, "attempt", a, "delay", d, "err", err)...)
		}
	}
	return keep, wait
}
