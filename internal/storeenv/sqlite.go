package storeenv

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
)

// SQLite runs on a database file in the test's temporary directory.
type SQLite struct{ onSQL }

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
