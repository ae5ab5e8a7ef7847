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
)

// LockCleanup implements store.CleanupLocker with a named lock (GET_LOCK)
// for the outbox table, taken on a connection of its own that then runs
// every batch: the lock and the deletes share a session, so a lock that
// died with its connection cannot leave a cleanup running beside the next
// holder's.
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
	return &cleaner{s: s, c: c, name: name}, true, nil
}

type cleaner struct {
	s    *Store
	c    *sql.Conn
	name string
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
	var released sql.NullInt64
	if err := l.c.QueryRowContext(ctx, l.s.q.namedUnlock, l.name).Scan(&released); err != nil || released.Int64 != 1 {
		drop(l.c)
		return
	}
	_ = l.c.Close()
}

// drop discards c's connection instead of giving it back to the pool, so
// the session's locks end with it: database/sql closes a connection whose
// Raw callback reports it bad.
func drop(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}
