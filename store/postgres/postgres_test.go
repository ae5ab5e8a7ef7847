package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, Harness{})
}

// Harness runs storetest on the local PostgreSQL, each test on its own tables.
type Harness struct{}

func (Harness) Open(t *testing.T) store.Store {
	t.Helper()
	return OpenTest(t, postgres.Options{})
}

// OpenTest opens a store on fresh tables in the test database and drops them
// when t ends.
func OpenTest(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	url := storetest.URL(t, "TXBOX_TEST_POSTGRES")
	ctx := context.Background()
	suffix := txbox.NewID()[24:]
	opts.Tables = store.Tables{Outbox: "outbox_t" + suffix, Inbox: "inbox_t" + suffix}
	s, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{opts.Tables.Outbox, opts.Tables.Inbox, opts.Tables.Outbox + "_migrations"} {
			_, _ = s.Pool().Exec(context.Background(), "DROP TABLE IF EXISTS "+tbl)
		}
		s.Close()
	})
	return s
}

func (Harness) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	ctx := context.Background()
	tx, err := s.(*postgres.Store).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return postgres.Tx(tx), func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }
}

func (Harness) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	ps := s.(*postgres.Store)
	_, err := ps.Pool().Exec(context.Background(), fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, $4, $5)`,
		ps.Tables().Outbox), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}
