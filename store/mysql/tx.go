package mysql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// retryable reports an InnoDB deadlock victim or lock wait timeout: the
// transaction was rolled back and may simply run again.
func retryable(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// inTx runs fn in a READ COMMITTED transaction, again when InnoDB rolled it
// back as a deadlock victim.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return inTxOn(ctx, s.db, fn)
}

// beginner starts transactions: the pool, or the one connection that holds
// the cleanup lock (cleanuplock.go).
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// inTxOn is inTx on b.
func inTxOn(ctx context.Context, b beginner, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = tx1(ctx, b, fn)
		if err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

func tx1(ctx context.Context, b beginner, fn func(tx *sql.Tx) error) error {
	tx, err := b.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execOn(ctx, s.db, q, args...)
}

// execOn is exec on b.
func execOn(ctx context.Context, b beginner, q string, args ...any) (int64, error) {
	var n int64
	err := inTxOn(ctx, b, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
