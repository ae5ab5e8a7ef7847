package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Ahead implements store.DeadBlocker (queries/ahead.sql).
func (s *Store) Ahead(ctx context.Context, rows []store.AggregateRow) ([]store.Ahead, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	keys := make([][3]any, len(rows))
	for i, r := range rows {
		keys[i] = [3]any{r.AggregateType, r.AggregateID, r.ID}
	}
	b, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	res, err := s.db.QueryContext(ctx, s.q.ahead, string(b))
	if err != nil {
		return nil, fmt.Errorf("sqlite: ahead: %w", err)
	}
	defer res.Close()
	var out []store.Ahead
	for res.Next() {
		var a store.Ahead
		if err := res.Scan(&a.AggregateType, &a.AggregateID, &a.ID, &a.EventID, &a.Dead); err != nil {
			return nil, fmt.Errorf("sqlite: ahead: %w", err)
		}
		out = append(out, a)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: ahead: %w", err)
	}
	return out, nil
}

// ReleaseHeld implements store.DeadBlocker (queries/release_held.sql).
func (s *Store) ReleaseHeld(ctx context.Context, all bool, types []string) (int64, error) {
	var n int64
	err := s.immediate(ctx, func(c *sql.Conn) error {
		var err error
		n, err = s.releaseHeld(ctx, c, all, types)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: release held rows: %w", err)
	}
	return n, nil
}

func (s *Store) releaseHeld(ctx context.Context, c *sql.Conn, all bool, types []string) (int64, error) {
	res, err := c.ExecContext(ctx, s.q.releaseHeld, all, sqladmin.TypesJSON(types))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Blocked implements store.DeadBlocker (queries/blocked.sql).
func (s *Store) Blocked(ctx context.Context) (store.Blocked, error) {
	var b store.Blocked
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q.blocked).Scan(&b.Aggregates, &b.Rows, &oldest); err != nil {
		return b, fmt.Errorf("sqlite: blocked: %w", err)
	}
	if oldest.Valid {
		b.OldestAge = max(0, s.now().Sub(fromMicros(oldest.Int64)))
	}
	return b, nil
}
