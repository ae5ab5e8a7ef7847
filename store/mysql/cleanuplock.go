package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// LockCleanup implements store.CleanupLocker with GET_LOCK, named after
// the outbox table, on a connection that then runs every batch too
// (sqladmin.SessionCleaner says why).
func (s *Store) LockCleanup(ctx context.Context) (store.Cleaner, bool, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("mysql: cleanup lock: %w", err)
	}
	sum := sha256.Sum256([]byte(s.tables.Qualified(s.tables.Outbox)))
	name := "txbox-cleanup-" + hex.EncodeToString(sum[:16]) // GET_LOCK names: at most 64 characters
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, s.q.namedLock, name, 0).Scan(&got); err != nil {
		drop(c)
		return nil, false, fmt.Errorf("mysql: cleanup lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		_ = c.Close()
		return nil, false, nil
	}
	return sqladmin.SessionCleaner{
		Cleanup: func(ctx context.Context, age time.Duration, limit int) (int64, error) {
			return s.cleanupBatch(ctx, c, age, limit)
		},
		InboxCleanup: func(ctx context.Context, age time.Duration, limit int) (int64, error) {
			return s.inboxCleanupBatch(ctx, c, age, limit)
		},
		Release: func(ctx context.Context) bool {
			var released sql.NullInt64
			return c.QueryRowContext(ctx, s.q.namedUnlock, name).Scan(&released) == nil && released.Int64 == 1
		},
		Keep: func() { _ = c.Close() },
		Drop: func() { drop(c) },
	}, true, nil
}

// drop discards c's connection instead of giving it back to the pool, so
// the session's locks end with it: database/sql closes a connection whose
// Raw callback reports it bad.
func drop(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}
