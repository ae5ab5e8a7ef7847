package storetest

import (
	"fmt"
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

// execSQL runs the statements in one transaction of h's on s and commits
// it; a statement's error fails the test, naming the statement.
func execSQL(t *testing.T, h Beginner, s store.Store, stmts ...string) {
	t.Helper()
	InTx(t, h, s, func(tx store.Tx) error {
		for _, q := range stmts {
			if _, err := tx.Exec(ctxT(t), q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
}
