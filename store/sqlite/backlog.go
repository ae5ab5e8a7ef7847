package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// backlogQuery repeats the partial indexes' predicates verbatim (unsent_idx,
// dead_idx) so the planner answers from them: SQLite keeps delivered rows in
// the table as SENT, and the sample must not read them.
const backlogQuery = `SELECT
	(SELECT count(*) FROM %[1]s WHERE status = 'PENDING' AND ` + unsentTerm + `),
	(SELECT count(*) FROM %[1]s WHERE status = 'RETRY' AND ` + unsentTerm + `),
	(SELECT count(*) FROM %[1]s WHERE status = 'PROCESSING' AND ` + unsentTerm + `),
	(SELECT min(created_at) FROM %[1]s WHERE ` + unsentTerm + `),
	(SELECT count(*) FROM %[1]s WHERE status = 'DEAD')`

// Backlog implements store.BacklogSampler.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	var oldest sql.NullInt64
	err := s.db.QueryRowContext(ctx, fmt.Sprintf(backlogQuery, s.q.table)).Scan(&b.Pending, &b.Retry, &b.Processing, &oldest, &b.Dead)
	if err != nil {
		return b, fmt.Errorf("sqlite: backlog: %w", err)
	}
	if oldest.Valid {
		b.OldestAge = max(0, time.Since(fromMicros(oldest.Int64)))
	}
	return b, nil
}
