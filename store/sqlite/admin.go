package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// The operator's statements (queries/stats.sql, list.sql, replay.sql,
// purge.sql, cleanup.sql), on the store's pool.

func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st, err := sqladmin.Stats(ctx, s.db, "sqlite", s.q.stats)
	if err != nil {
		return st, err
	}
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q.statsOldest).Scan(&oldest); err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	if oldest.Valid {
		t := fromMicros(oldest.Int64)
		st.OldestPending = &t
		st.OldestAge = s.now().Sub(t)
	}
	return st, nil
}

func microsArg(t time.Time) any { return micros(t) }

// filter builds the WHERE clause for f; timestamps become microseconds.
func filter(f store.Filter) (string, []any) {
	where, args := sqlstore.FilterSQL(f, sqlstore.QuestionMark, 1)
	return where, sqlstore.TimesAs(args, microsArg)
}

func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	where, args := filter(f)
	return sqladmin.List(ctx, s.db, "sqlite", s.q.list(where, sqlstore.OrderBy(f), sqladmin.ListLimit(f)), args, collect)
}

func (s *Store) Replay(ctx context.Context, f store.Filter) (int64, error) {
	return s.deadRows(ctx, "replay", "replay.sql", f)
}

func (s *Store) Purge(ctx context.Context, f store.Filter) (int64, error) {
	return s.deadRows(ctx, "purge", "purge.sql", f)
}

// deadRows runs file, Replay's or Purge's statement, on the DEAD rows f
// selects, and releases in the same transaction the rows held behind them
// (deadblock.go).
func (s *Store) deadRows(ctx context.Context, what, file string, f store.Filter) (int64, error) {
	where, args := filter(sqlstore.DeadOnly(f))
	var n int64
	err := s.immediate(ctx, func(c *sql.Conn) error {
		var err error
		n, err = sqladmin.ChangeDead(ctx, c, s.q.filtered(file, where), args, func() error {
			_, err := s.releaseHeld(ctx, c, true, nil)
			return err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return n, nil
}

// CleanupBatch deletes at most limit SENT rows in one short write
// transaction, so the relay's claims get the write lock between batches.
func (s *Store) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.exec(ctx, "cleanup", s.q.cleanup, micros(s.now().Add(-age)), limit)
}
