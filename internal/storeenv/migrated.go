package storeenv

import (
	"context"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// Migrated creates s's tables, failing the test if it cannot, and returns
// s: the first step of every test that writes to or consumes from a store.
func Migrated[S store.Store](t testing.TB, s S) S {
	t.Helper()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// MigratedPostgres is OpenPostgres with the store's tables created.
func MigratedPostgres(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	return Migrated(t, OpenPostgres(t, opts))
}
