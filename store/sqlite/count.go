package sqlite

import (
	"context"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Count implements store.Outbox (SQLite keeps SENT rows in the outbox
// table).
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(f)
	return sqladmin.Count(ctx, s.db, "sqlite", "count", s.q.filtered("count.sql", where), args...)
}

// CountCleanup implements store.Counter: the WHERE clause of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return sqladmin.Count(ctx, s.db, "sqlite", "count cleanup", s.q.countCleanup, micros(s.now().Add(-age)))
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return sqladmin.Count(ctx, s.db, "sqlite", "count inbox cleanup", s.q.countInboxCleanup, micros(time.Now().Add(-age)))
}
