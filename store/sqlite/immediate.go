package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The statements of a write transaction on a connection of its own (the
// claim's, the migrations'): BEGIN IMMEDIATE takes the write lock before
// the transaction reads anything, whatever the pool's _txlock setting.
const (
	beginImmediateSQL = `BEGIN IMMEDIATE`
	commitSQL         = `COMMIT`
	rollbackSQL       = `ROLLBACK`
)

// immediate runs fn in a BEGIN IMMEDIATE transaction on a connection of its
// own, so it works whatever the pool's _txlock setting is. A connection whose
// transaction state is unknown after a failure is discarded, never reused.
func (s *Store) immediate(ctx context.Context, fn func(c *sql.Conn) error) (err error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	bad := false
	defer func() {
		if bad {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		c.Close()
	}()
	if err := beginImmediate(ctx, c); err != nil {
		return err
	}
	done := context.WithoutCancel(ctx)
	if err := fn(c); err != nil {
		if _, rbErr := c.ExecContext(done, rollbackSQL); rbErr != nil {
			bad = true
		}
		return err
	}
	if _, err := c.ExecContext(done, commitSQL); err != nil {
		_, _ = c.ExecContext(done, rollbackSQL)
		bad = true
		return err
	}
	return nil
}

// beginImmediate takes the write lock. The busy timeout normally does the
// waiting; retrying SQLITE_BUSY here, for up to busyTimeout in all, covers a
// pool opened by the caller without one (New).
func beginImmediate(ctx context.Context, c *sql.Conn) error {
	start := time.Now()
	wait := time.Millisecond
	for {
		_, err := c.ExecContext(ctx, beginImmediateSQL)
		if err == nil || !isBusy(err) || time.Since(start) >= busyTimeout {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

func isBusy(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}
