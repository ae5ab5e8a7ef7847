package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox/store"
)

// LockCleanup implements store.CleanupLocker with a session advisory lock
// named after the outbox table, taken on a connection of its own that then
// runs every batch: the lock and the deletes share a session, so a lock
// that died with its connection cannot leave a cleanup running beside the
// next holder's.
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
	return &cleaner{s: s, c: c, key: key}, true, nil
}

type cleaner struct {
	s   *Store
	c   *pgxpool.Conn
	key string
}

func (l *cleaner) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return l.s.cleanupBatch(ctx, l.c, age, limit)
}

func (l *cleaner) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return l.s.inboxCleanupBatch(ctx, l.c, age, limit)
}

// Unlock releases the lock and gives the connection back; a connection
// whose unlock failed goes, lest the pool hand out a session that still
// holds the lock.
func (l *cleaner) Unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var released bool
	if err := l.c.QueryRow(ctx, l.s.st.advisoryUnlock, l.key).Scan(&released); err != nil || !released {
		drop(l.c)
		return
	}
	l.c.Release()
}

// drop closes c's connection before giving it back, so the pool discards it
// and the session's locks end with it.
func drop(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Conn().Close(ctx)
	c.Release()
}
