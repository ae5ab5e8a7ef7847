package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// backlogQuery repeats the partial indexes' predicates verbatim (unsent_idx,
// dead_idx), which is what lets the planner answer from them: the cost
// follows the backlog, not the delivered rows that stay in the table (rows
// marked SENT in place before 003_sent_archive.sql, or a table an operator
// refilled).
const backlogQuery = `SELECT
	count(*) FILTER (WHERE status = 'PENDING'),
	count(*) FILTER (WHERE status = 'RETRY'),
	count(*) FILTER (WHERE status = 'PROCESSING'),
	COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)) * 1000, 0)::float8,
	(SELECT count(*) FROM %[1]s WHERE status = 'DEAD')
FROM %[1]s WHERE status IN ('PENDING', 'RETRY', 'PROCESSING')`

// Backlog implements store.BacklogSampler.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	var ageMs float64
	err := s.pool.QueryRow(ctx, fmt.Sprintf(backlogQuery, s.q.table)).Scan(&b.Pending, &b.Retry, &b.Processing, &ageMs, &b.Dead)
	if err != nil {
		return b, fmt.Errorf("postgres: backlog: %w", err)
	}
	b.OldestAge = max(0, time.Duration(ageMs*float64(time.Millisecond)))
	return b, nil
}
