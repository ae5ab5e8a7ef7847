package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// The relay's marks (queries/mark_*.sql, release.sql). Every one is fenced:
// it touches only the rows the lease still holds (locked_by = lease AND
// status = PROCESSING).

// MarkSent moves the rows this lease holds into the archive (or deletes
// them with DeleteSent), in one transaction.
func (s *Store) MarkSent(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	ids = sortedUnique(ids)
	if s.opts.DeleteSent {
		in, args := inList(ids, nil)
		n, err := s.exec(ctx, s.q.markSentDelete.With(in), append(args, lease)...)
		if err != nil {
			return 0, fmt.Errorf("mysql: mark sent: %w", refused(err))
		}
		return n, nil
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Lock and fence first: only the rows still held by this lease move.
		in, args := inList(ids, nil)
		rows, err := tx.QueryContext(ctx, s.q.markSentLock.With(in), append(args, lease)...)
		if err != nil {
			return err
		}
		var held []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			held = append(held, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		n = int64(len(held))
		if n == 0 {
			return nil
		}
		in, args = inList(held, nil)
		if _, err := tx.ExecContext(ctx, s.q.markSentArchive.With(in), args...); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q.markSentRemove.With(in), args...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: mark sent: %w", refused(err))
	}
	return n, nil
}

// MarkFailed updates each row in its own fenced statement, in id order (the
// order every transaction here locks rows in), all in one transaction.
func (s *Store) MarkFailed(ctx context.Context, lease string, fs []store.Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	fs = slices.Clone(fs)
	slices.SortStableFunc(fs, func(a, b store.Failure) int { return cmp.Compare(a.ID, b.ID) })
	var total int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		total = 0
		for _, f := range fs {
			var res sql.Result
			var err error
			msg := sqlstore.Truncate(f.Error, 2000)
			if f.Dead {
				res, err = tx.ExecContext(ctx, s.q.markDead, f.Spends(), msg, f.ID, lease)
			} else {
				res, err = tx.ExecContext(ctx, s.q.markRetry, f.Spends(), max(f.Delay, 0).Microseconds(), msg, f.ID, lease)
			}
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: mark failed: %w", err)
	}
	return total, nil
}

func (s *Store) Release(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	in, args := inList(sortedUnique(ids), nil)
	n, err := s.exec(ctx, s.q.release.With(in), append(args, lease)...)
	if err != nil {
		return 0, fmt.Errorf("mysql: release: %w", err)
	}
	return n, nil
}

func sortedUnique(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
