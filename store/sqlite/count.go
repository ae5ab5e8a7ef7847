package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// Count implements store.Outbox (SQLite keeps SENT rows in the outbox
// table).
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(f)
	return s.count(ctx, "count", `SELECT count(*) FROM `+s.q.table+` WHERE `+where, args...)
}

// CountCleanup implements store.Counter: the WHERE clause of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count cleanup", `SELECT count(*) FROM `+s.q.table+` WHERE status = 'SENT' AND sent_at < ?`,
		micros(s.now().Add(-age)))
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count inbox cleanup", `SELECT count(*) FROM `+s.inboxTable()+`
		WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < ?`, micros(time.Now().Add(-age)))
}

func (s *Store) count(ctx context.Context, what, q string, args ...any) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return n, nil
}
