package relay

import (
	"context"
	"fmt"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// A mark the database refuses for a row's own reason (store.ErrRefused: an
// archive key the row collides with, a constraint or trigger an operator
// added) must not fail the whole batch, which would be published again and
// refused again for ever, stopping every aggregate in it. The refused row is found by bisection, the others are
// marked, and the refused one is recorded as a failed attempt: RETRY with
// a last_error that says why, DEAD after MaxAttempts, logged once per
// attempt.

// markSentIsolating marks ids, isolating the refused rows (claimapi.Isolate),
// and returns how many were marked and a failure for each refused row.
func (r *Relay) markSentIsolating(ctx context.Context, lease string, ids []int64, recs []store.Record) (int64, []store.Failure, error) {
	byID := recordsByID(recs)
	var marked int64
	var refused []store.Failure
	err := claimapi.Isolate(ids, func(ids []int64) error {
		n, err := r.cfg.Store.MarkSent(ctx, lease, ids)
		marked += n
		return err
	}, func(id int64, err error) { refused = append(refused, r.refusedMark(byID[id], err)) })
	return marked, refused, err
}

// refusedMark is the failure recorded for a published row whose mark the
// database refused.
func (r *Relay) refusedMark(rec store.Record, err error) store.Failure {
	f := r.failure(rec, fmt.Errorf("published, but marking it sent failed: %w", err), "")
	if !f.Dead {
		// failure logs a retry at debug level; this one an operator must see.
		r.log.Warn("published, but marking it sent was refused; it will be published again", "event_id", rec.EventID,
			"aggregate", rec.AggregateType+"/"+rec.AggregateID, "attempt", rec.RetryCount+1, "retry_in", f.Delay, "err", err)
	}
	return f
}

func recordsByID(recs []store.Record) map[int64]store.Record {
	m := make(map[int64]store.Record, len(recs))
	for _, rec := range recs {
		m[rec.ID] = rec
	}
	return m
}
