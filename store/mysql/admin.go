package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// The operator's statements (queries/stats*.sql, list.sql, replay.sql,
// purge.sql, cleanup.sql), on the store's pool.

// Stats counts the hot table by status and the archive as SENT.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st, err := sqladmin.Stats(ctx, s.db, "mysql", s.q.stats)
	if err != nil {
		return st, err
	}
	var oldest utcTime
	var ageUs sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q.statsOldest).Scan(&oldest, &ageUs); err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	st.OldestPending = oldest.ptr()
	if ageUs.Valid {
		st.OldestAge = time.Duration(ageUs.Int64) * time.Microsecond
	}
	return st, nil
}

// statusIndexHint makes a status-filtered list read status_idx (status, id)
// as a range. Left to itself MariaDB reads it as a ref on status alone and
// filters the id bound row by row, so a keyset page in the middle of a
// million dead rows reads every row before it. An aggregate or event id
// filter has a better index of its own.
func statusIndexHint(f store.Filter) string {
	if f.Status == "" || len(f.EventIDs) > 0 || f.AggregateID != "" {
		return ""
	}
	return ` FORCE INDEX (status_idx)`
}

// tables says which tables List and Count read for f: the hot table
// unless f asks for SENT rows only, the archive unless f asks for a status
// that is never archived.
func tables(f store.Filter) (hot, archive bool) {
	return f.Status != txbox.StatusSent, sqladmin.ReadsArchive(f)
}

// List reads the hot table and the archive of SENT rows (tables).
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	where, args := filter(f)
	hot, archive := tables(f)
	q := s.q.list(where, sqlstore.OrderBy(f), sqladmin.ListLimit(f), statusIndexHint(f), hot, archive)
	return sqladmin.List(ctx, s.db, "mysql", q, sqladmin.Twice(args, hot && archive), collect)
}

func (s *Store) Replay(ctx context.Context, f store.Filter) (int64, error) {
	return s.deadRows(ctx, "replay", "replay.sql", f)
}

func (s *Store) Purge(ctx context.Context, f store.Filter) (int64, error) {
	return s.deadRows(ctx, "purge", "purge.sql", f)
}

// deadRows runs file, Replay's or Purge's statement, on the DEAD rows f
// selects (DEAD rows never leave the hot table), and releases in the same
// transaction the rows held behind them (deadblock.go).
func (s *Store) deadRows(ctx context.Context, what, file string, f store.Filter) (int64, error) {
	where, args := filter(sqlstore.DeadOnly(f))
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = sqladmin.ChangeDead(ctx, tx, s.q.filtered(file, where, true, false), args, func() error {
			_, err := s.releaseHeld(ctx, tx, true, nil)
			return err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: %s: %w", what, err)
	}
	return n, nil
}

// CleanupBatch deletes at most limit archived rows sent before now - age,
// oldest first, in one statement. The archive is not touched by claims, so
// cleanup never contends with the relay.
func (s *Store) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.cleanupBatch(ctx, s.db, age, limit)
}

func (s *Store) cleanupBatch(ctx context.Context, on beginner, age time.Duration, limit int) (int64, error) {
	n, err := execOn(ctx, on, s.q.cleanup, age.Microseconds(), limit)
	if err != nil {
		return n, fmt.Errorf("mysql: cleanup: %w", err)
	}
	return n, nil
}
