package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Count implements store.Outbox over the same tables as List.
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(f)
	var parts []string
	var all []any
	if f.Status != txbox.StatusSent {
		parts = append(parts, `(SELECT COUNT(*) FROM `+s.q.table+` WHERE `+where+`)`)
		all = append(all, args...)
	}
	if f.Status == "" || f.Status == txbox.StatusSent {
		parts = append(parts, `(SELECT COUNT(*) FROM `+s.q.sent+` WHERE `+where+`)`)
		all = append(all, args...)
	}
	q := `SELECT ` + parts[0]
	for _, p := range parts[1:] {
		q += ` + ` + p
	}
	return s.count(ctx, "count", q, all...)
}

// CountCleanup implements store.Counter: the WHERE clause of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count cleanup", `SELECT COUNT(*) FROM `+s.q.sent+`
		WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`, age.Microseconds())
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count inbox cleanup", `SELECT COUNT(*) FROM `+s.inboxTable()+`
		WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`, age.Microseconds())
}

func (s *Store) count(ctx context.Context, what, q string, args ...any) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("mysql: %s: %w", what, err)
	}
	return n, nil
}
