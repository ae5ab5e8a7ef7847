package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Stats counts the hot table by status and the archive as SENT. Counting
// the archive reads it; Cleanup is what keeps it small.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Counts: map[txbox.Status]int64{}}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM `+s.q.table+` GROUP BY status
		UNION ALL SELECT 'SENT', COUNT(*) FROM `+s.q.sent)
	if err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("mysql: stats: %w", err)
		}
		if n > 0 {
			st.Counts[txbox.Status(status)] += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	var oldest utcTime
	var ageUs sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT MIN(created_at), TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6))
		FROM `+s.q.table+` WHERE unsent = 1`).Scan(&oldest, &ageUs)
	if err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	st.OldestPending = oldest.ptr()
	if ageUs.Valid {
		st.OldestAge = time.Duration(ageUs.Int64) * time.Microsecond
	}
	st.Dead = st.Counts[txbox.StatusDead]
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

// List reads the hot table and, unless the filter asks for a status that
// never is archived, the archive of SENT rows.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	where, args := filter(f)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	lim := strconv.Itoa(limit)
	order := sqlstore.OrderBy(f)
	var parts []string
	var all []any
	if f.Status != txbox.StatusSent {
		parts = append(parts, `(SELECT `+recordCols+` FROM `+s.q.table+statusIndexHint(f)+` WHERE `+where+` ORDER BY `+order+` LIMIT `+lim+`)`)
		all = append(all, args...)
	}
	if f.Status == "" || f.Status == txbox.StatusSent {
		parts = append(parts, `(SELECT `+recordCols+` FROM `+s.q.sent+` WHERE `+where+` ORDER BY `+order+` LIMIT `+lim+`)`)
		all = append(all, args...)
	}
	q := strings.Join(parts, " UNION ALL ")
	if len(parts) > 1 {
		q += ` ORDER BY ` + order + ` LIMIT ` + lim
	}
	rows, err := s.db.QueryContext(ctx, q, all...)
	if err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	return recs, nil
}

func (s *Store) Replay(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(sqlstore.DeadOnly(f))
	n, err := s.exec(ctx, `UPDATE `+s.q.table+` SET status = 'PENDING', retry_count = 0, next_retry_at = NULL,
		locked_by = NULL, locked_until = NULL WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: replay: %w", err)
	}
	return n, nil
}

func (s *Store) Purge(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(sqlstore.DeadOnly(f))
	n, err := s.exec(ctx, `DELETE FROM `+s.q.table+` WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: purge: %w", err)
	}
	return n, nil
}

// CleanupBatch deletes at most limit archived rows sent before now - age,
// oldest first, in one statement. The archive is not touched by claims, so
// cleanup never contends with the relay.
func (s *Store) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	n, err := s.exec(ctx, `DELETE FROM `+s.q.sent+` WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
		ORDER BY sent_at, id LIMIT ?`, age.Microseconds(), limit)
	if err != nil {
		return n, fmt.Errorf("mysql: cleanup: %w", err)
	}
	return n, nil
}
