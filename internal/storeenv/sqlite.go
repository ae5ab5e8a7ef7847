package storeenv

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
)

// SQLite runs on a database file in the test's temporary directory.
type SQLite struct{}

var sqlitePaths sync.Map // *sqlite.Store -> file path

// URL is the --db URL of s's file.
func (SQLite) URL(t *testing.T, s store.Store) string {
	p, ok := sqlitePaths.Load(s)
	if !ok {
		t.Fatalf("storeenv: %T was not opened by storeenv", s)
	}
	return "sqlite://" + p.(string)
}

func (SQLite) Open(t *testing.T) store.Store { return OpenSQLite(t, sqlite.Options{}) }

// OpenSQLite opens a store on fresh tables in a new database file. Without
// opts.Now, its clock is a Clock that JumpClock moves.
func OpenSQLite(t testing.TB, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	opts.Tables = Fresh()
	var clock *Clock
	if opts.Now == nil {
		clock = new(Clock)
		opts.Now = clock.Now
	}
	path := filepath.Join(t.TempDir(), "txbox.db")
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	sqlitePaths.Store(s, path)
	if clock != nil {
		TrackClock(t, s, clock)
	}
	t.Cleanup(func() { sqlitePaths.Delete(s); s.Close() })
	return s
}

// SQLDB is the store's *sql.DB.
func (SQLite) SQLDB(_ *testing.T, s store.Store) *sql.DB { return s.(*sqlite.Store).DB() }

func (SQLite) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	tx, err := s.(*sqlite.Store).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() }) // see Postgres.Begin
	return store.SQLTx(tx), tx.Commit, tx.Rollback
}

func (SQLite) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	ss := s.(*sqlite.Store)
	_, err := ss.DB().Exec(fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (?, ?, ?, ?, ?)`,
		ss.Tables().Outbox), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}
