// Package sabotage builds the deliberately broken variants of txbox that
// the fault harness must catch (faults.TestSabotagedBuildsAreCaught). Each
// breaks a guarantee from the outside, by wrapping what the relay or the
// inbox is given, so that no switch sits in their hot paths. They are
// installed only in builds with a sabotage build tag, by cmd/txbox and
// faults; never build releases with those tags.
package sabotage

import (
	"context"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/store"
)

// MarkFirst returns s with every claim marked SENT before the relay
// publishes it, the bug of abp#24340: a relay that dies between the claim
// and the broker's confirmation loses the batch. The relay's own marks that
// follow find nothing to change (as after a lost lease). Build tag
// txbox_sabotage_mark_first.
func MarkFirst(s store.Store) store.Store {
	m := markFirst{s}
	if _, ok := s.(store.TxClaimer); ok {
		return markFirstTx{m}
	}
	return m
}

type markFirst struct{ store.Store }

func (m markFirst) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	recs, err := m.Store.Claim(ctx, req)
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	if _, err := m.Store.MarkSent(ctx, req.Lease, ids(recs)); err != nil {
		return nil, err
	}
	return recs, nil
}

type markFirstTx struct{ markFirst }

// ClaimTx commits every claimed row as sent at once and hands the relay a
// claim whose outcome is no longer recorded.
func (m markFirstTx) ClaimTx(ctx context.Context, limit int) (store.Claim, error) {
	c, err := m.Store.(store.TxClaimer).ClaimTx(ctx, limit)
	if err != nil || len(c.Records()) == 0 {
		return c, err
	}
	if err := c.Finish(ctx, ids(c.Records()), nil); err != nil {
		return nil, err
	}
	return finished{c.Records()}, nil
}

type finished struct{ recs []store.Record }

func (f finished) Records() []store.Record                              { return f.recs }
func (finished) Finish(context.Context, []int64, []store.Failure) error { return nil }
func (finished) Abort()                                                 {}

func ids(recs []store.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// AckFirst returns s with every delivery acknowledged as soon as it is
// received, before the inbox transaction committed: a consumer that dies
// in between loses the event. The inbox's own settling that follows is sent
// as well, as the broken build always did. Build tag
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

// Overtake returns s with every claim's records handed to the relay in
// reverse order, so an aggregate's later rows are published before its
// earlier ones: the per-aggregate run is broken. Build tag
// txbox_sabotage_overtake.
func Overtake(s store.Store) store.Store {
	o := overtake{s}
	if _, ok := s.(store.TxClaimer); ok {
		return overtakeTx{o}
	}
	return o
}

type overtake struct{ store.Store }

func (o overtake) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	recs, err := o.Store.Claim(ctx, req)
	return reversed(recs), err
}

type overtakeTx struct{ overtake }

func (o overtakeTx) ClaimTx(ctx context.Context, limit int) (store.Claim, error) {
	c, err := o.Store.(store.TxClaimer).ClaimTx(ctx, limit)
	if err != nil {
		return c, err
	}
	return reversedClaim{c}, nil
}

type reversedClaim struct{ store.Claim }

func (r reversedClaim) Records() []store.Record { return reversed(r.Claim.Records()) }

func reversed(recs []store.Record) []store.Record {
	out := make([]store.Record, len(recs))
	for i, r := range recs {
		out[len(recs)-1-i] = r
	}
	return out
}

// NoInbox returns st with the inbox's record of each event skipped: every
// delivery looks like the first, nothing is written for it, and the
// version guard's check-and-set always passes, so a redelivered event is
// applied again. The version guard is part of the inbox's dedupe (with it,
// an Ordered consumer drops a redelivery as stale), so the broken build
// skips both; the consumer using it runs without VersionGuard and Ordered.
// Build tag txbox_sabotage_no_inbox.
func NoInbox[T any](st store.InboxStore[T]) store.InboxStore[T] { return noInbox[T]{st} }

type noInbox[T any] struct{ store.InboxStore[T] }

// InboxDialect hides the store's batch insert and processed-acquire
// shortcuts: the inbox falls back to InboxAcquire, which inserts nothing.
func (n noInbox[T]) InboxDialect() store.InboxDialect {
	return noInboxDialect{n.InboxStore.InboxDialect()}
}

type noInboxDialect struct{ store.InboxDialect }

func (noInboxDialect) InboxAcquire(context.Context, store.Tx, string, txbox.Event) (store.InboxState, int, error) {
	return store.InboxFresh, 0, nil
}

func (noInboxDialect) InboxDone(context.Context, store.Tx, string, string, txbox.Status, string) error {
	return nil
}

func (noInboxDialect) InboxVersion(context.Context, store.Tx, string, string, string, int64) (int64, bool, error) {
	return 0, true, nil
}
