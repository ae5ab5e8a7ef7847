package relay

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/txbox/txbox/store"
)

// Blocking dead letters (Config.DeadBlocks). By default a DEAD event does
// not block its aggregate: the later events go on. For the aggregate types
// named here a DEAD event holds back every later event of its aggregate
// until it is replayed or purged, so a consumer whose state depends on
// every event in order (a ledger, a state machine) never applies event 7
// when event 5 died. Held rows are RETRY rows due centuries from now
// (store.DeadBlocker); every claim already stops an aggregate at such a
// row, so they hold back the rows written after them too.
//
// Three places hold rows (DeliverOrdered, for a CDC reader: settleOrdered
// and gateStream, the same way):
//   - settleRun: a lane whose event goes DEAD holds the rest of the lane;
//   - gate: a claimed lane with a DEAD row ahead of it in the table (made
//     DEAD by an earlier batch or another relay) is held whole;
//   - and the lane of a blocking type publishes one event per round, so a
//     broker's permanent refusal of one event cannot let the events behind
//     it through in the same pipelined run.
//
// Replay and Purge release the held rows behind the rows they change (in
// the store, in their transaction). The watch loop also releases, every
// round, the held rows that lie behind no DEAD row of a type this relay
// blocks: rows held in a race with a replay, or after the operator took a
// type off the list. So every relay of a table needs the same list.

// deadBlocks is Config.DeadBlocks, compiled.
type deadBlocks struct {
	all   bool
	types []string // sorted
}

func newDeadBlocks(list []string) deadBlocks {
	var d deadBlocks
	for _, t := range list {
		if t == "*" {
			d.all = true
			continue
		}
		if !slices.Contains(d.types, t) {
			d.types = append(d.types, t)
		}
	}
	slices.Sort(d.types)
	return d
}

func (d deadBlocks) on() bool { return d.all || len(d.types) > 0 }

// blocks reports whether a DEAD event of aggType holds back its aggregate.
func (d deadBlocks) blocks(aggType string) bool {
	if d.all {
		return true
	}
	_, ok := slices.BinarySearch(d.types, aggType)
	return ok
}

// hold is the failure mark that holds rec behind the DEAD event
// deadEventID: no attempt spent, due in store.HoldFor.
func hold(rec store.Record, deadEventID string) store.Failure {
	return store.Failure{ID: rec.ID, Outage: true, Delay: store.HoldFor, Error: store.HoldReason(deadEventID)}
}

// isHold tells a hold from an outage's deferral among the marks.
func isHold(f store.Failure) bool { return f.Outage && f.Delay == store.HoldFor }

// gate holds the lanes of order with a DEAD row ahead of them in the table
// and releases those with an unsent one ahead (a replay moved it there
// after the claim; it goes first), unless the batch follows this relay's
// own batches in flight (chained claims: the rows ahead are theirs). It
// returns the lanes left to publish; release gives a lane back (deliver's).
// One statement per batch, and only for batches with lanes of a blocking
// type: nothing at all without DeadBlocks.
func (r *Relay) gate(ctx context.Context, c claimed, lanes map[string][]item, order []string, out *outcome, release func(lane string) int) []string {
	if r.blocker == nil || !r.blocks.on() {
		return order
	}
	var rows []store.AggregateRow
	for _, k := range order {
		head := lanes[k][0].rec
		if r.blocks.blocks(head.AggregateType) {
			rows = append(rows, store.AggregateRow{AggregateType: head.AggregateType, AggregateID: head.AggregateID, ID: head.ID})
		}
	}
	if len(rows) == 0 {
		return order
	}
	actx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	ahead, err := r.blocker.Ahead(actx, rows)
	cancel()
	if err != nil {
		// Unknown what lies ahead: the lanes go back unpublished and come
		// again with a later claim.
		r.ctrs.Errors.Add(1)
		r.log.Warn("cannot look for DEAD events ahead of the claimed ones; releasing their aggregates' rows", "err", err, "aggregates", len(rows))
		for _, row := range rows {
			release(aggKey(row.AggregateType, row.AggregateID))
		}
		return r.live(order, lanes)
	}
	for _, a := range ahead {
		k := aggKey(a.AggregateType, a.AggregateID)
		switch {
		case a.Dead:
			for _, it := range lanes[k] {
				out.failures = append(out.failures, hold(it.rec, a.EventID))
			}
			r.log.Info("holding an aggregate's events behind its DEAD one", "aggregate_type", a.AggregateType, "aggregate_id", a.AggregateID, "dead_event_id", a.EventID, "rows", len(lanes[k]))
			lanes[k] = nil
			c.laneDone(k, false)
		case !c.followsOwn():
			release(k)
		}
	}
	return r.live(order, lanes)
}

// releaseHeld puts back the held rows that no DEAD row of a type this
// relay blocks holds back, and samples the held rows for Stats: every
// watch round on a relay with types that block, once at start on one
// without (rows held while the operator still listed their type). It is a
// no-op for a store that cannot hold rows.
func (o *observer) releaseHeld(ctx context.Context) {
	r := o.r
	if r.blocker == nil || (!r.blocks.on() && o.heldSwept) {
		return
	}
	o.mu.Lock()
	down := o.sampleErr != nil
	o.mu.Unlock()
	if down {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, max(r.cfg.MetricsInterval, time.Second))
	defer cancel()
	n, err := r.blocker.ReleaseHeld(sctx, r.blocks.all, r.blocks.types)
	if err == nil && n > 0 {
		r.log.Info("released events no DEAD event holds back any more", "rows", n)
	}
	var b store.Blocked
	if err == nil {
		b, err = r.blocker.Blocked(sctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("releasing or sampling held rows failed", "err", err)
		}
		return
	}
	o.mu.Lock()
	o.blocked = b
	o.mu.Unlock()
	o.heldSwept = true
}

// logDeadBlocks says at start which types block.
func logDeadBlocks(log *slog.Logger, d deadBlocks) {
	if d.on() {
		log.Info("a DEAD event holds back the later events of its aggregate", "types", d.types, "all_types", d.all)
	}
}

// gateStream is gate for DeliverOrdered (a change data capture reader):
// the stream's aggregates of a blocking type with a DEAD row ahead of their
// first event in the table are taken out of the stream whole, into held.
// The unsent rows ahead are the stream's own, on their way, and are
// ignored. An error leaves the stream as it was: the caller must not
// confirm the records.
func (r *Relay) gateStream(ctx context.Context, st *orderedStream, held *[]store.Failure) error {
	if r.blocker == nil || !r.blocks.on() {
		return nil
	}
	var rows []store.AggregateRow
	seen := map[string]bool{}
	for _, at := range st.rest {
		rec := st.items[at].rec
		if k := laneKey(rec); !seen[k] && r.blocks.blocks(rec.AggregateType) {
			seen[k] = true
			rows = append(rows, store.AggregateRow{AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, ID: rec.ID})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	ahead, err := r.blocker.Ahead(ctx, rows)
	if err != nil {
		return err
	}
	dead := map[string]string{}
	for _, a := range ahead {
		if a.Dead {
			dead[aggKey(a.AggregateType, a.AggregateID)] = a.EventID
		}
	}
	r.holdLanes(st, dead, held)
	return nil
}

// holdBehind notes that rec, of a blocking type, went DEAD in the stream:
// the rest of its aggregate is held once the round is settled
// (holdLanes).
func (r *Relay) holdBehind(st *orderedStream, rec store.Record) {
	if !r.blocks.blocks(rec.AggregateType) {
		return
	}
	if st.dead == nil {
		st.dead = map[string]string{}
	}
	st.dead[laneKey(rec)] = rec.EventID
}

// holdLanes takes the events of the aggregates in dead (lane key -> the
// DEAD event id) out of the stream, into held.
func (r *Relay) holdLanes(st *orderedStream, dead map[string]string, held *[]store.Failure) {
	if len(dead) == 0 {
		return
	}
	keep := st.rest[:0]
	for _, at := range st.rest {
		it := st.items[at]
		k := laneKey(it.rec)
		id, ok := dead[k]
		if !ok {
			keep = append(keep, at)
			continue
		}
		*held = append(*held, hold(it.rec, id))
		if st.left[k]--; st.left[k] == 0 {
			delete(st.left, k)
		}
	}
	st.rest = keep
	for k, id := range dead {
		r.log.Info("holding an aggregate's events behind its DEAD one", "aggregate", strings.Replace(k, "\x00", "/", 1), "dead_event_id", id)
	}
}
