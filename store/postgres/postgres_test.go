package postgres_test

import (
	"context"
	"testing"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, storeenv.Postgres{})
}

func TestInboxConformance(t *testing.T) {
	storetest.RunInbox(t, storeenv.Postgres{})
}

// migratedStore is a store on fresh tables, migrated, dropped when t ends.
func migratedStore(t *testing.T, opts postgres.Options) *postgres.Store {
	t.Helper()
	s := storeenv.OpenPostgres(t, opts)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessions(t *testing.T) { storetest.RunSessions(t, storeenv.Postgres{}) }
