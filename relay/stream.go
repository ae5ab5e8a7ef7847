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
// ids the broker confirmed, the records that can never be published, and
// the records held behind a DEAD event of their aggregate
// (Config.DeadBlocks), which the caller marks as they are.
type Outcome struct {
	Sent []int64
	Dead []store.Failure
	Held []store.Failure
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
	st := &orderedStream{items: make([]item, 0, len(recs)), left: map[string]int{}}
	for _, rec := range recs {
		it, err := r.item(rec)
		if err != nil {
			out.failures = append(out.failures, r.failure(rec, txbox.Permanent(err), ""))
			continue
		}
		st.items = append(st.items, it)
		st.left[laneKey(rec)]++
	}
	st.rest = make([]int, len(st.items))
	for i := range st.rest {
		st.rest[i] = i
	}
	var held []store.Failure
	result := func() Outcome { return Outcome{Sent: out.sent, Dead: out.failures, Held: held} }
	if err := r.gateStream(ctx, st, &held); err != nil {
		return result(), err
	}
	attempts := map[int64]*tally{}
	for len(st.rest) > 0 {
		if err := ctx.Err(); err != nil {
			return result(), err
		}
		pick := st.roundPick(r.pipelined, r.blocks.blocks)
		msgs := make([]broker.Message, len(pick))
		created := make([]time.Time, len(pick))
		for i, at := range pick {
			msgs[i], created[i] = st.items[st.rest[at]].msg, st.items[st.rest[at]].rec.CreatedAt
		}
		errs := r.publishRound(ctx, time.Time{}, msgs, created)
		wait := r.settleOrdered(st, pick, errs, attempts, &out, &held)
		if wait > 0 && !sleep(ctx, wait, nil, nil) {
			return result(), ctx.Err()
		}
	}
	r.ctrs.Published.Add(int64(len(out.sent)))
	r.ctrs.Dead.Add(int64(len(out.failures)))
	r.ctrs.Held.Add(int64(len(held)))
	return result(), nil
}

// tally counts a streamed event's failed publishes: all of them, which
// space its retries, and those that spent one of its attempts.
type tally struct{ tries, spent int }

// orderedStream is what DeliverOrdered has left to publish: rest holds
// indexes into items, in stream order, so a round moves ints, not
// messages; left counts each aggregate's events in rest, so a round of
// one event per aggregate stops scanning once it has every aggregate.
type orderedStream struct {
	items []item
	rest  []int
	left  map[string]int
	// dead: the aggregates of a blocking type whose event went DEAD in
	// the round being settled (lane key -> its event id): their other
	// events are held (deadblock.go).
	dead map[string]string
}

// roundPick chooses the events of one round, as positions in rest. With a
// publisher that keeps per-key order in flight it is the longest front of
// the stream in which an aggregate appears again only to continue its run
// to the same destination: the broker then gets the stream in commit
// order. With any other publisher it is the first event of each aggregate
// in the stream (up to maxRound): one unconfirmed event per aggregate, as
// the polling loop's lanes, so a round is not cut short by the first
// repeated aggregate; events of different aggregates may then reach the
// broker out of commit order, never two of one aggregate. An aggregate
// whose DEAD events block (blocks) never has two events in one round
// (deadblock.go says why).
func (st *orderedStream) roundPick(pipelined bool, blocks func(aggType string) bool) []int {
	seen := map[string]string{} // aggregate -> destination of its last event in the round
	var pick []int
	for i := 0; i < len(st.rest) && len(pick) < maxRound; i++ {
		it := &st.items[st.rest[i]]
		k := laneKey(it.rec)
		t, in := seen[k]
		switch {
		case !in:
			seen[k] = it.msg.Topic
			pick = append(pick, i)
			if !pipelined && len(seen) == len(st.left) {
				return pick // every aggregate left has its event in the round
			}
		case pipelined && t == it.msg.Topic && !blocks(it.rec.AggregateType):
			pick = append(pick, i) // the front continues
		case pipelined:
			return pick
		}
	}
	return pick
}

// settleOrdered records the results of the picked events, drops them from
// the stream unless they are to be sent again, and returns how long to
// wait before the next round. A retryable failure keeps its event and
// every later picked event of its aggregate (confirmed or not: their
// copies are duplicates the inbox absorbs); the rest of the round is
// settled as it came back.
func (r *Relay) settleOrdered(st *orderedStream, pick []int, errs []error, attempts map[int64]*tally, out *outcome, held *[]store.Failure) time.Duration {
	blocked := map[string]bool{}
	var wait time.Duration
	drop := make([]int, 0, len(pick)) // positions in rest, ascending
	for j, at := range pick {
		it := &st.items[st.rest[at]]
		k := laneKey(it.rec)
		if blocked[k] {
			continue
		}
		switch err := errs[j]; {
		case err == nil:
			out.sent = append(out.sent, it.rec.ID)
			delete(attempts, it.rec.ID)
		case errors.Is(err, txbox.ErrPermanent):
			out.failures = append(out.failures, r.failure(it.rec, err, ""))
			r.holdBehind(st, it.rec)
		default:
			// An outage of the way out spends no attempt: the stream waits
			// for the broker however long it is away.
			n := attempts[it.rec.ID]
			if n == nil {
				n = &tally{}
				attempts[it.rec.ID] = n
			}
			n.tries++
			if !isOutage(err) {
				n.spent++
				if n.spent >= r.cfg.MaxAttempts {
					rec := it.rec
					rec.RetryCount = n.spent - 1
					out.failures = append(out.failures, r.failure(rec, err, ""))
					r.holdBehind(st, it.rec)
					break
				}
				r.ctrs.Retried.Add(1)
			} else {
				r.ctrs.Deferred.Add(1)
			}
			d := backoff.Delay(n.tries, r.cfg.BackoffBase, min(r.cfg.BackoffMax, streamRetryCap))
			wait = max(wait, d)
			blocked[k] = true
			r.log.Debug("stream publish failed, will retry", eventAttrs(it.rec, "attempts_spent", n.spent, "delay", d, "err", err)...)
			continue
		}
		drop = append(drop, at)
		if st.left[k]--; st.left[k] == 0 {
			delete(st.left, k)
		}
	}
	st.drop(drop)
	r.holdLanes(st, st.dead, held)
	st.dead = nil
	return wait
}

// drop removes the positions (ascending) from rest. A round that took the
// front of the stream (one aggregate, or a pipelined front) costs nothing;
// otherwise only the part of rest after the first dropped position moves.
func (st *orderedStream) drop(pos []int) {
	if len(pos) == 0 {
		return
	}
	if pos[len(pos)-1] == len(pos)-1 {
		st.rest = st.rest[len(pos):]
		return
	}
	w, j := pos[0], 0
	for i := pos[0]; i < len(st.rest); i++ {
		if j < len(pos) && pos[j] == i {
			j++
			continue
		}
		st.rest[w] = st.rest[i]
		w++
	}
	st.rest = st.rest[:w]
}
