// Package storeenv gives tests a database of each dialect on fresh tables:
// the harness of storetest and of the end-to-end scenarios, written once.
package storeenv

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// Postgres runs against TXBOX_TEST_POSTGRES (default: the local server).
type Postgres struct {
	// Logical runs against a database with logical decoding instead
	// (LogicalPostgresURL), for tests of CDC relays.
	Logical bool
}

// URL is the --db URL of the test database.
func (p Postgres) URL(t *testing.T, _ store.Store) string {
	t.Helper()
	return p.url(t)
}

func (p Postgres) url(t testing.TB) string {
	t.Helper()
	if p.Logical {
		return LogicalPostgresURL(t)
	}
	return testenv.URL(t, "TXBOX_TEST_POSTGRES")
}

// Open returns an unmigrated store on fresh tables, dropped when t ends.
func (p Postgres) Open(t *testing.T) store.Store {
	t.Helper()
	return p.open(t, postgres.Options{})
}

// OpenPostgres is Open with options; tables are always fresh.
func OpenPostgres(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	return Postgres{}.open(t, opts)
}

// OpenLogicalPostgres is OpenPostgres on a database with logical decoding
// (LogicalPostgresURL).
func OpenLogicalPostgres(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	return Postgres{Logical: true}.open(t, opts)
}

func (p Postgres) open(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	url := p.url(t)
	ctx := context.Background()
	opts.Tables = Fresh()
	s, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	dropAtEnd(t, opts.Tables, func(ctx context.Context, stmt string) { _, _ = s.Pool().Exec(ctx, stmt) }, s.Close)
	return s
}

// dropAtEnd drops every table a store may create for tables when t ends,
// running each DROP with exec, and then closes the store.
func dropAtEnd(t testing.TB, tables store.Tables, exec func(ctx context.Context, stmt string), closeStore func() error) {
	t.Cleanup(func() {
		// Bounded: a drop queued behind a transaction a failed test left
		// open would hang the package until its timeout instead of failing.
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		for _, tbl := range Owned(tables) {
			exec(ctx, "DROP TABLE IF EXISTS "+tbl)
		}
		_ = closeStore()
	})
}

// dropTimeout bounds a test's table cleanup.
const dropTimeout = 30 * time.Second

// Fresh returns unique table names for one test.
func Fresh() store.Tables {
	sfx := txbox.NewID()[24:]
	return store.Tables{Outbox: "outbox_t" + sfx, Inbox: "inbox_t" + sfx}
}

// Owned lists every table a store may create for tb, for cleanup.
func Owned(tb store.Tables) []string {
	return []string{tb.Outbox, tb.Outbox + "_sent", tb.Outbox + "_migrations", tb.Inbox, tb.Inbox + "_versions"}
}

// SQLDB is the store's pool as *sql.DB (pgx stdlib), closed when t ends.
func (Postgres) SQLDB(t *testing.T, s store.Store) *sql.DB {
	db := stdlib.OpenDBFromPool(s.(*postgres.Store).Pool())
	t.Cleanup(func() { db.Close() })
	return db
}

func (Postgres) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	ctx := context.Background()
	tx, err := s.(*postgres.Store).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A test that fails between Begin and commit must not leave the
	// transaction open: its locks would hold up the tables' cleanup.
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	return pgxtx.Wrap(tx), func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }
}

func (Postgres) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	ps := s.(*postgres.Store)
	_, err := ps.Pool().Exec(context.Background(), fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, $4, $5)`,
		ps.Tables().Qualified(ps.Tables().Outbox)), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}
