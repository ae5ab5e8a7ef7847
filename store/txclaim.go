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
type TxClaimer interface {
	ClaimTx(ctx context.Context, limit int) (Claim, error)
}

// Claim is an open transaction holding the row locks of its records. Exactly
// one of Finish and Abort ends it; a claim with no records is already ended.
type Claim interface {
	Records() []Record
	// Finish records the outcome and commits: sent rows leave the unsent set
	// (archived or deleted, as the store is configured), failures go to
	// RETRY or DEAD, and every other record is handed back unchanged. On
	// error nothing is recorded and every record is handed back.
	Finish(ctx context.Context, sent []int64, failures []Failure) error
	// Abort hands every record back unchanged.
	Abort()
}
