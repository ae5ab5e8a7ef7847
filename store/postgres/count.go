package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Count implements store.Outbox over the same tables as List.
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := sqlstore.FilterSQL(f, ph, 1)
	return s.count(ctx, "count", s.st.filtered("count.sql", where, sqladmin.ReadsArchive(f), ""), args...)
}

// CountCleanup implements store.Counter: the WHERE clauses of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count cleanup", s.st.countCleanup, age.Milliseconds())
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count inbox cleanup", s.st.countInboxCleanup, age.Milliseconds())
}

func (s *Store) count(ctx context.Context, what, q string, args ...any) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return n, nil
}
