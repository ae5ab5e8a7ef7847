package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// Backlog implements store.BacklogSampler. The hot table holds only unsent
// and DEAD rows (delivered ones move to the archive), and both statements
// are answered from its indexes: status_idx for the counts, unsent_idx for
// the oldest row.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM `+s.q.table+`
		WHERE status IN ('PENDING', 'RETRY', 'PROCESSING', 'DEAD') GROUP BY status`)
	if err != nil {
		return b, fmt.Errorf("mysql: backlog: %w", err)
	}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return b, fmt.Errorf("mysql: backlog: %w", err)
		}
		switch status {
		case "PENDING":
			b.Pending = n
		case "RETRY":
			b.Retry = n
		case "PROCESSING":
			b.Processing = n
		case "DEAD":
			b.Dead = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("mysql: backlog: %w", err)
	}
	var ageUs sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6))
		FROM `+s.q.table+` WHERE unsent = 1`).Scan(&ageUs)
	if err != nil {
		return b, fmt.Errorf("mysql: backlog: %w", err)
	}
	if ageUs.Valid && ageUs.Int64 > 0 {
		b.OldestAge = time.Duration(ageUs.Int64) * time.Microsecond
	}
	return b, nil
}
