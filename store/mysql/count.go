package mysql

import (
	"context"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Count implements store.Outbox over the same tables as List.
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(f)
	hot, archive := tables(f)
	return sqladmin.Count(ctx, s.db, "mysql", "count", s.q.filtered("count.sql", where, hot, archive), sqladmin.Twice(args, hot && archive)...)
}

// CountCleanup implements store.Counter: the WHERE clause of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return sqladmin.Count(ctx, s.db, "mysql", "count cleanup", s.q.countCleanup, age.Microseconds())
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return sqladmin.Count(ctx, s.db, "mysql", "count inbox cleanup", s.q.countInboxCleanup, age.Microseconds())
}
