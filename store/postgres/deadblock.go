package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// Ahead implements store.DeadBlocker (queries/ahead.sql).
func (s *Store) Ahead(ctx context.Context, rows []store.AggregateRow) ([]store.Ahead, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	types, aggs, ids := make([]string, len(rows)), make([]string, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		types[i], aggs[i], ids[i] = r.AggregateType, r.AggregateID, r.ID
	}
	res, err := s.pool.Query(ctx, s.st.ahead, types, aggs, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: ahead: %w", err)
	}
	out, err := pgx.CollectRows(res, func(r pgx.CollectableRow) (store.Ahead, error) {
		var a store.Ahead
		err := r.Scan(&a.AggregateType, &a.AggregateID, &a.ID, &a.EventID, &a.Dead)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: ahead: %w", err)
	}
	return out, nil
}

// ReleaseHeld implements store.DeadBlocker (queries/release_held.sql).
func (s *Store) ReleaseHeld(ctx context.Context, all bool, types []string) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.st.releaseHeld, all, types)
	if err != nil {
		return 0, fmt.Errorf("postgres: release held rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// releaseHeldAfter releases, in Replay's or Purge's transaction, the rows
// held behind any DEAD row that is gone now; n is how many they changed.
func (s *Store) releaseHeldAfter(ctx context.Context, tx pgx.Tx, n int64) error {
	if n == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, s.st.releaseHeld, true, []string(nil))
	return err
}

// Blocked implements store.DeadBlocker (queries/blocked.sql).
func (s *Store) Blocked(ctx context.Context) (store.Blocked, error) {
	var b store.Blocked
	var ms float64
	if err := s.pool.QueryRow(ctx, s.st.blocked).Scan(&b.Aggregates, &b.Rows, &ms); err != nil {
		return b, fmt.Errorf("postgres: blocked: %w", err)
	}
	b.OldestAge = max(0, time.Duration(ms*float64(time.Millisecond)))
	return b, nil
}
