package storetest

import (
	"testing"

	"github.com/txbox/txbox/store"
)

// Beginner begins a transaction on a store, as every Harness does.
type Beginner interface {
	Begin(t *testing.T, s store.Store) (tx store.Tx, commit, rollback func() error)
}

// InTx runs fn in a transaction of h's on s and commits it; an error of fn
// rolls it back and fails the test, as a failed commit does.
func InTx(t *testing.T, h Beginner, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	tx, commit, rollback := h.Begin(t, s)
	if err := fn(tx); err != nil {
		_ = rollback()
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
}
