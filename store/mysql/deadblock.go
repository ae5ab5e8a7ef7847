package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Ahead implements store.DeadBlocker (queries/ahead.sql).
func (s *Store) Ahead(ctx context.Context, rows []store.AggregateRow) ([]store.Ahead, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var k strings.Builder
	args := make([]any, 0, 3*len(rows))
	for i, r := range rows {
		if i > 0 {
			k.WriteString(" UNION ALL ")
		}
		k.WriteString("SELECT ? AS t, ? AS a, ? AS b")
		args = append(args, r.AggregateType, r.AggregateID, r.ID)
	}
	res, err := s.db.QueryContext(ctx, s.q.ahead.With(k.String()), args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: ahead: %w", err)
	}
	defer res.Close()
	var out []store.Ahead
	for res.Next() {
		var a store.Ahead
		if err := res.Scan(&a.AggregateType, &a.AggregateID, &a.ID, &a.EventID, &a.Dead); err != nil {
			return nil, fmt.Errorf("mysql: ahead: %w", err)
		}
		out = append(out, a)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("mysql: ahead: %w", err)
	}
	return out, nil
}

// ReleaseHeld implements store.DeadBlocker (queries/held_free.sql,
// release_held.sql), in one transaction.
func (s *Store) ReleaseHeld(ctx context.Context, all bool, types []string) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.releaseHeld(ctx, tx, all, types)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: release held rows: %w", err)
	}
	return n, nil
}

func (s *Store) releaseHeld(ctx context.Context, tx *sql.Tx, all bool, types []string) (int64, error) {
	res, err := tx.QueryContext(ctx, s.q.heldFree, all, sqladmin.TypesJSON(types))
	if err != nil {
		return 0, err
	}
	var ids []int64
	for res.Next() {
		var id int64
		if err := res.Scan(&id); err != nil {
			res.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	res.Close()
	if err := res.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	in, args := inList(ids, nil)
	r, err := tx.ExecContext(ctx, s.q.releaseHeld.With(in), args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// Blocked implements store.DeadBlocker (queries/blocked.sql).
func (s *Store) Blocked(ctx context.Context) (store.Blocked, error) {
	var b store.Blocked
	var us int64
	if err := s.db.QueryRowContext(ctx, s.q.blocked).Scan(&b.Aggregates, &b.Rows, &us); err != nil {
		return b, fmt.Errorf("mysql: blocked: %w", err)
	}
	b.OldestAge = max(0, time.Duration(us)*time.Microsecond)
	return b, nil
}
