// Package sabotage builds the deliberately broken variants of txbox that
// the fault harness must catch (faults.TestSabotagedBuildsAreCaught). Each
// breaks one guarantee from the outside, by wrapping what the relay or the
// inbox is given, so that no switch sits in their hot paths. They are
// installed only in builds with a sabotage build tag, by cmd/txbox and
// faults; never build releases with those tags.
//
// A wrapper keeps every optional interface of what it wraps (shapes.go):
// the relay and the inbox choose their code paths by the interfaces their
// store, its claims and its dialect have (transaction claims, chained
// claims, the split, the backlog gauges, the inbox fast paths), and a
// sabotaged build that lost one would run another relay than the one
// shipped, and be caught, or not, for that.
package sabotage

import (
	"context"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// MarkFirst returns s with every claim marked SENT before the relay
// publishes it, the bug of abp#24340: a relay that dies between the claim
// and the broker's confirmation, or whose publish fails, loses the batch.
// The relay's own marks that follow find nothing to change (as after a lost
// lease), and a transaction claim is committed at once, so what the relay
// later hands back, fails or isolates changes nothing either. Build tag
// txbox_sabotage_mark_first.
func MarkFirst(s store.Store) store.Store {
	return wrapStore(s, hooks{
		claim: func(ctx context.Context, s store.Store, req store.ClaimRequest) ([]store.Record, error) {
			recs, err := s.Claim(ctx, req)
			if err != nil || len(recs) == 0 {
				return recs, err
			}
			if _, err := s.MarkSent(ctx, req.Lease, ids(recs)); err != nil {
				return nil, err
			}
			return recs, nil
		},
		claimTx: func(ctx context.Context, c claimapi.Claim) (claimapi.Claim, error) {
			if len(c.Records()) == 0 {
				return c, nil
			}
			recs := c.Records()
			if err := c.Finish(ctx, ids(recs), nil); err != nil {
				return nil, err
			}
			return wrapClaim(c, recs, true), nil
		},
	})
}

func ids(recs []store.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// Overtake returns s with every claim's records handed to the relay in
// reverse order, so an aggregate's later rows are published before its
// earlier ones: the per-aggregate run is broken. Build tag
// txbox_sabotage_overtake.
func Overtake(s store.Store) store.Store {
	return wrapStore(s, hooks{
		claim: func(ctx context.Context, s store.Store, req store.ClaimRequest) ([]store.Record, error) {
			recs, err := s.Claim(ctx, req)
			return reversed(recs), err
		},
		claimTx: func(_ context.Context, c claimapi.Claim) (claimapi.Claim, error) {
			return wrapClaim(c, reversed(c.Records()), false), nil
		},
	})
}

func reversed(recs []store.Record) []store.Record {
	out := make([]store.Record, len(recs))
	for i, r := range recs {
		out[len(recs)-1-i] = r
	}
	return out
}

// AckFirst returns s with every delivery acknowledged as soon as it is
// received, before the inbox transaction committed: a consumer that dies
// in between, or whose transaction fails, loses the event. The inbox's own
// settling that follows is sent as well, as the broken build always did.
// The deliveries are the subscriber's own, with their optional interfaces
// (broker.AsyncAcker); subscribers have none of their own. Build tag
// txbox_sabotage_ack_first.
func AckFirst(s broker.Subscriber) broker.Subscriber { return ackFirst{s} }

type ackFirst struct{ broker.Subscriber }

func (a ackFirst) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	ds, err := a.Subscriber.Receive(ctx, max)
	for _, d := range ds {
		_ = d.Ack(ctx)
	}
	return ds, err
}

// NoInbox returns st with the inbox's record of each event skipped: every
// delivery looks like the first, nothing is written for it, and the
// version guard's check-and-set always passes, so a redelivered event is
// applied again. The version guard is part of the inbox's dedupe (with it,
// an Ordered consumer drops a redelivery as stale), so the broken build
// skips both; the consumer using it runs without VersionGuard and Ordered.
// The dialect's fast paths (store.InboxProcessedAcquirer,
// store.InboxBatchInserter) stay, broken the same way, so the inbox runs
// the code path it runs with the store unwrapped. Build tag
// txbox_sabotage_no_inbox.
func NoInbox[T any](st store.InboxStore[T]) store.InboxStore[T] {
	if s, ok := st.(store.Store); ok {
		if w, ok := wrapStore(s, hooks{inbox: noInboxDialect}).(store.InboxStore[T]); ok {
			return w
		}
	}
	return inboxOnly[T]{st}
}

// inboxOnly is NoInbox of an inbox store that is no outbox store (such as
// store.SQLInbox's): it has no optional interface to keep.
type inboxOnly[T any] struct{ store.InboxStore[T] }

func (n inboxOnly[T]) InboxDialect() store.InboxDialect {
	return noInboxDialect(n.InboxStore.InboxDialect())
}

// noInbox is the inbox SQL that records nothing.
type noInbox struct{ store.InboxDialect }

func (noInbox) InboxAcquire(context.Context, store.Tx, string, txbox.Event) (store.InboxState, int, error) {
	return store.InboxFresh, 0, nil
}

func (noInbox) InboxDone(context.Context, store.Tx, string, string, txbox.Status, string) error {
	return nil
}

func (noInbox) InboxVersion(context.Context, store.Tx, string, string, string, int64) (int64, bool, error) {
	return 0, true, nil
}
