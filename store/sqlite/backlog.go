package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// Backlog implements store.BacklogSampler with one statement
// (queries/backlog.sql) that reads only the partial indexes.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	var oldest sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.q.backlog).Scan(&b.Pending, &b.Retry, &b.Processing, &oldest, &b.Dead)
	if err != nil {
		return b, fmt.Errorf("sqlite: backlog: %w", err)
	}
	if oldest.Valid {
		b.OldestAge = max(0, time.Since(fromMicros(oldest.Int64)))
	}
	return b, nil
}
