package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, Harness{})
}

func TestInboxConformance(t *testing.T) { storetest.RunInbox(t, Harness{}) }

// TestInboxConformanceNew runs the inbox cases on New's pool: rollback
// journal and DEFERRED transactions, so InboxAcquire must take the write lock
// with its first statement and wait for it.
func TestInboxConformanceNew(t *testing.T) { storetest.RunInbox(t, newHarness{}) }

// Harness is the shared SQLite harness of storetest and the scenarios.
type Harness = storeenv.SQLite

// OpenTest opens a store on fresh tables, dropped when t ends.
func OpenTest(t testing.TB, opts sqlite.Options) *sqlite.Store { return storeenv.OpenSQLite(t, opts) }

// TestStoreConformanceNew runs the suite on a store made with New over a pool
// that has only a busy timeout: rollback journal, DEFERRED transactions. The
// claim's own BEGIN IMMEDIATE must be enough.
func TestStoreConformanceNew(t *testing.T) {
	storetest.Run(t, newHarness{})
}

type newHarness struct{ Harness }

func (newHarness) Open(t *testing.T) store.Store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "txbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := new(storeenv.Clock)
	s, err := sqlite.New(db, sqlite.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	storeenv.TrackClock(t, s, clock)
	return s
}

func TestOpenSettings(t *testing.T) {
	ctx := context.Background()
	s := OpenTest(t, sqlite.Options{})
	var mode string
	var busy int
	if err := s.DB().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q %v, want wal", mode, err)
	}
	if err := s.DB().QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 5000 {
		t.Fatalf("busy_timeout %d %v, want 5000", busy, err)
	}
	for _, bad := range []string{"", ":memory:", "file::memory:?cache=shared", "sqlite://:memory:", "a.db?mode=ro", "file:a.db"} {
		if _, err := sqlite.Open(ctx, bad, sqlite.Options{}); !errors.Is(err, txbox.ErrConfig) {
			t.Errorf("Open(%q): %v, want a config error", bad, err)
		}
	}
	if _, err := sqlite.New(s.DB(), sqlite.Options{Tables: store.Tables{Schema: "main"}}); !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("schema: %v, want a config error", err)
	}
	p := filepath.Join(t.TempDir(), "url.db")
	s2, err := sqlite.Open(ctx, "sqlite://"+p, sqlite.Options{})
	if err != nil {
		t.Fatalf("sqlite:// URL: %v", err)
	}
	defer s2.Close()
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("sqlite:// URL did not create %s: %v", p, err)
	}
}

// With DeleteSent a confirmed row is deleted, still fenced by the lease.
func TestDeleteSent(t *testing.T) {
	ctx := context.Background()
	s := OpenTest(t, sqlite.Options{DeleteSent: true})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Dialect().InsertEvents(ctx, store.SQLTx(tx), []txbox.Event{txbox.MustEvent("Order", "a", "E", 1), txbox.MustEvent("Order", "b", "E", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(recs) != 2 {
		t.Fatalf("claim: %v %d", err, len(recs))
	}
	if n, err := s.MarkSent(ctx, "other", []int64{recs[0].ID}); err != nil || n != 0 {
		t.Fatalf("stale mark: %d %v", n, err)
	}
	if n, err := s.MarkSent(ctx, "L", []int64{recs[0].ID}); err != nil || n != 1 {
		t.Fatalf("mark: %d %v", n, err)
	}
	all, err := s.List(ctx, store.Filter{})
	if err != nil || len(all) != 1 || all[0].ID != recs[1].ID {
		t.Fatalf("after delete: %v %+v", err, all)
	}
}
