package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Count implements store.Outbox.
func (s *Store) Count(ctx context.Context, f store.Filter) (int64, error) {
	where, args := sqlstore.FilterSQL(f, ph, 1)
	q := `SELECT (SELECT count(*) FROM ` + s.q.table + ` WHERE ` + where + `)`
	if f.Status == "" || f.Status == txbox.StatusSent {
		q += ` + (SELECT count(*) FROM ` + s.q.sent + ` WHERE ` + where + `)`
	}
	return s.count(ctx, "count", q, args...)
}

// CountCleanup implements store.Counter: the WHERE clauses of Cleanup.
func (s *Store) CountCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count cleanup", `SELECT
		(SELECT count(*) FROM `+s.q.sent+` WHERE sent_at < now() - $1 * interval '1 millisecond')
		+ (SELECT count(*) FROM `+s.q.table+` WHERE status = 'SENT' AND sent_at < now() - $1 * interval '1 millisecond')`,
		age.Milliseconds())
}

// CountInboxCleanup implements store.Counter: the WHERE clause of
// InboxCleanup.
func (s *Store) CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error) {
	return s.count(ctx, "count inbox cleanup", `SELECT count(*) FROM `+Dialect{Tables: s.tables}.inbox()+`
		WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < now() - $1 * interval '1 millisecond'`, age.Milliseconds())
}

func (s *Store) count(ctx context.Context, what, q string, args ...any) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return n, nil
}
