package store

import (
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
