package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Backlog implements store.BacklogSampler. The hot table holds only unsent
// and DEAD rows (delivered ones move to the archive), and both statements
// are answered from its indexes: status_idx for the counts, unsent_idx for
// the oldest row (queries/backlog*.sql).
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	counts, err := sqladmin.QueryStatusCounts(ctx, s.db, "mysql", "backlog", s.q.backlog)
	if err != nil {
		return store.Backlog{}, err
	}
	b := sqladmin.Backlog(counts)
	var ageUs sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q.backlogOldest).Scan(&ageUs); err != nil {
		return b, fmt.Errorf("mysql: backlog: %w", err)
	}
	if ageUs.Valid && ageUs.Int64 > 0 {
		b.OldestAge = time.Duration(ageUs.Int64) * time.Microsecond
	}
	return b, nil
}

// Horizon implements store.HorizonSampler. It needs the PROCESS privilege
// (information_schema.innodb_trx); without it the sample fails.
func (s *Store) Horizon(ctx context.Context) (store.Horizon, error) {
	var h store.Horizon
	var us int64
	if err := s.db.QueryRowContext(ctx, s.q.horizon).Scan(&us, &h.Holder, &h.DeadRows); err != nil {
		return h, fmt.Errorf("mysql: horizon: %w", err)
	}
	h.OldestTransaction = time.Duration(us) * time.Microsecond
	return h, nil
}
