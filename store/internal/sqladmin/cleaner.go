package sqladmin

import (
	"context"
	"time"
)

// SessionCleaner is the store.Cleaner of the PostgreSQL and MySQL stores:
// it deletes on the one session that holds the cleanup lock, so a lock
// that died with its connection (a killed session, a failover) cannot
// leave a cleanup running beside the next holder's: its next batch fails.
type SessionCleaner struct {
	Cleanup, InboxCleanup func(ctx context.Context, age time.Duration, limit int) (int64, error)
	// Release unlocks; true when the session held the lock.
	Release func(ctx context.Context) bool
	// Keep gives the session back to its pool; Drop closes it, which ends
	// its locks too.
	Keep, Drop func()
}

func (c SessionCleaner) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return c.Cleanup(ctx, age, limit)
}

func (c SessionCleaner) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return c.InboxCleanup(ctx, age, limit)
}

// Unlock releases the lock and gives the session back; a session whose
// unlock failed is closed instead, lest the pool hand out a session that
// still holds the lock.
func (c SessionCleaner) Unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.Release(ctx) {
		c.Keep()
		return
	}
	c.Drop()
}
