// Package claimapi is the relay's interface to a store that holds its
// claims by an open transaction instead of a lease (the PostgreSQL store):
// claims, chained claims, the isolation of refused rows, and the split of a
// table's aggregates between relays. It is internal because it changes
// with the claim protocol; the contract stores outside this module
// implement is store.Store (and store.Outbox).
package claimapi

import (
	"context"
	"errors"

	"github.com/txbox/txbox/store"
)

// TxClaimer is a store whose claim can be held by the row locks of an open
// transaction instead of a lease written into the rows. A claim then costs
// one locking read and its outcome one write per row, where a lease costs a
// write to take it and another to mark it; a relay that dies or loses its
// connection loses its locks with it, so there is no lease to expire and no
// window in which two relays publish one row.
//
// The claim's rules are Claim's: the lowest deliverable ids, never a row of
// an aggregate whose earlier row is unsent and not taken by this claim
// (locked by another open claim, leased, or waiting in RETRY).
type TxClaimer interface {
	ClaimTx(ctx context.Context, limit int) (Claim, error)
}

// ChainClaimer is a TxClaimer that can also claim behind itself: its
// ClaimTxChained may return the later rows of an aggregate whose earlier
// rows this store's other open claims hold (still deliverable, and taken by
// nothing else), so one aggregate's events can be in several claims at
// once. Every other rule of ClaimTx holds.
//
// The caller keeps the order: a chained claim's rows of an aggregate may be
// published only after the earlier claims' rows of it were, and may count
// as sent only if every earlier claim's rows of it were sent and committed.
// Where an earlier claim released some or failed them, the later claim
// must release its rows of that aggregate too. An earlier claim here is
// any claim of this store that was open when the chained claim started.
// (The relay does all of this; see relay/chain.go.)
//
// A claim that will release rows (a failed publish, a shutdown, an earlier
// claim that did not send its own) says so at once with Release, before it
// ends: later chained claims then stop at those rows instead of taking the
// rows behind them, which would have to be released as well.
type ChainClaimer interface {
	TxClaimer
	ClaimTxChained(ctx context.Context, limit int) (ChainedClaim, error)
}

// ChainedClaim is a claim of ClaimTxChained.
type ChainedClaim interface {
	Claim
	// Release marks records of this claim that will not count as sent:
	// later chained claims no longer take the rows behind them. Safe to call
	// from any goroutine, before Finish or Abort.
	Release(ids []int64)
}

// Claim is an open transaction holding the row locks of its records. Exactly
// one of Finish and Abort ends it; a claim with no records is already ended.
type Claim interface {
	Records() []store.Record
	// Finish records the outcome and commits: sent rows leave the unsent set
	// (archived or deleted, as the store is configured), failures go to
	// RETRY or DEAD, and every other record is released unchanged. On
	// error nothing is recorded and every record is released.
	Finish(ctx context.Context, sent []int64, failures []store.Failure) error
	// Abort releases every record unchanged.
	Abort()
}

// Splitter is a store whose relays can split the aggregates of one outbox
// table between them. Two relay processes that claim from one backlog
// otherwise meet each other's rows in flight in every claim and skip them
// one by one; with few hot aggregates they spend more time claiming than
// the second process adds.
//
// Split makes this store's claims take only their share of the aggregates
// for as long as other stores of the table are split too: the members
// divide the aggregates between them, and a member that leaves (or dies,
// or loses its connection) hands its share to the others at their next
// claim. The split only chooses which rows each claim looks at; the claim
// contract (order, one holder per row) holds whatever each member believes
// about the others. leave ends the membership; each Split needs one leave.
type Splitter interface {
	Split(ctx context.Context) (leave func(), err error)
}

// IsolatingClaim is a Claim whose Finish can isolate a refused row: when
// the marks are refused (store.ErrRefused), it marks again, bisecting, so
// that every row that can be marked is, and records each refused row with
// the failure refused gives it (RETRY or DEAD, counted as an attempt). The
// normal path costs what Finish costs.
type IsolatingClaim interface {
	Claim
	FinishIsolating(ctx context.Context, sent []int64, failures []store.Failure, refused func(id int64, err error) store.Failure) error
}

// Isolate marks ids with mark and, when the database refuses
// (store.ErrRefused), marks again in halves down to the single refused
// rows, so that every row that can be marked is; each refused row goes to
// refused. Any other error stops it and is returned. Stores (a claim's FinishIsolating) and the
// relay (lease marks) both isolate this way.
func Isolate(ids []int64, mark func(ids []int64) error, refused func(id int64, err error)) error {
	err := mark(ids)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, store.ErrRefused):
		return err
	case len(ids) == 1:
		refused(ids[0], err)
		return nil
	}
	if err := Isolate(ids[:len(ids)/2], mark, refused); err != nil {
		return err
	}
	return Isolate(ids[len(ids)/2:], mark, refused)
}
