package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// LockCleanup implements store.CleanupLocker with a session advisory lock,
// named after the outbox table, on a connection that then runs every batch
// too (sqladmin.SessionCleaner says why).
func (s *Store) LockCleanup(ctx context.Context) (store.Cleaner, bool, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: cleanup lock: %w", err)
	}
	key := "txbox-cleanup:" + s.st.args.Table
	var got bool
	if err := c.QueryRow(ctx, s.st.advisoryTryLock, key).Scan(&got); err != nil {
		drop(c)
		return nil, false, fmt.Errorf("postgres: cleanup lock: %w", err)
	}
	if !got {
		c.Release()
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
			var released bool
			return c.QueryRow(ctx, s.st.advisoryUnlock, key).Scan(&released) == nil && released
		},
		Keep: c.Release,
		Drop: func() { drop(c) },
	}, true, nil
}

// drop closes c's connection before giving it back, so the pool discards it
// and the session's locks end with it.
func drop(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Conn().Close(ctx)
	c.Release()
}
