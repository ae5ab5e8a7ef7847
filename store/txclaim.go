package store

import "context"

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
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
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
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
type ChainClaimer interface {
	TxClaimer
	ClaimTxChained(ctx context.Context, limit int) (ChainedClaim, error)
}

// ChainedClaim is a claim of ClaimTxChained.
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
type ChainedClaim interface {
	Claim
	// Release marks records of this claim that will not count as sent:
	// later chained claims no longer take the rows behind them. Safe to call
	// from any goroutine, before Finish or Abort.
	Release(ids []int64)
}

// Claim is an open transaction holding the row locks of its records. Exactly
// one of Finish and Abort ends it; a claim with no records is already ended.
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
type Claim interface {
	Records() []Record
	// Finish records the outcome and commits: sent rows leave the unsent set
	// (archived or deleted, as the store is configured), failures go to
	// RETRY or DEAD, and every other record is released unchanged. On
	// error nothing is recorded and every record is released.
	Finish(ctx context.Context, sent []int64, failures []Failure) error
	// Abort releases every record unchanged.
	Abort()
}
