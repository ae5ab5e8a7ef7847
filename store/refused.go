package store

import (
	"context"
	"errors"
)

// ErrRefused marks a statement the database refused for a reason in the
// data (a constraint, a trigger, a value it cannot store), as opposed to a
// lost connection or a timeout: retrying the same rows cannot help, but the
// other rows of the statement may well go through on their own. Stores wrap
// such errors so that errors.Is(err, ErrRefused) holds.
var ErrRefused = errors.New("store: refused by the database")

// Refused wraps err with ErrRefused.
func Refused(err error) error {
	if err == nil || errors.Is(err, ErrRefused) {
		return err
	}
	return refusedError{err}
}

type refusedError struct{ err error }

func (e refusedError) Error() string   { return e.err.Error() }
func (e refusedError) Unwrap() []error { return []error{e.err, ErrRefused} }

// IsolatingClaim is a Claim whose Finish can isolate a refused row: when the
// marks are refused (ErrRefused), it marks again, bisecting, so that every
// row that can be marked is, and records each refused row with the failure
// refused gives it (RETRY or DEAD, counted as an attempt). The normal path
// costs what Finish costs.
//
// Not stable, do not implement: this is the relay's interface to the
// PostgreSQL store, and it changes with the claim protocol; the contract
// stores outside this module implement is Store (and Outbox).
type IsolatingClaim interface {
	Claim
	FinishIsolating(ctx context.Context, sent []int64, failures []Failure, refused func(id int64, err error) Failure) error
}

// Isolate marks ids with mark and, when the database refuses (ErrRefused),
// marks again in halves down to the single refused rows, so that every row
// that can be marked is; each refused row goes to refused. Any other error
// stops it and is returned. Stores (a claim's FinishIsolating) and the
// relay (lease marks) both isolate this way.
func Isolate(ids []int64, mark func(ids []int64) error, refused func(id int64, err error)) error {
	err := mark(ids)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrRefused):
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
