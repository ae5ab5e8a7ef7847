package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox/store/postgres"
)

// A cleanup lock whose session dies is free for the next relay at once, and
// the cleanup that held it cannot go on beside the next one: its next batch
// fails, because the lock and the deletes share the session.
func TestCleanupLockEndsWithItsSession(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	c, ok, err := s.LockCleanup(ctx)
	if err != nil || !ok {
		t.Fatalf("lock: ok %v, %v", ok, err)
	}
	defer c.Unlock() // on a dead session: must neither hang nor panic
	var pid int
	key := "txbox-cleanup:" + s.Tables().Qualified(s.Tables().Outbox)
	if err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
		AND ((classid::int8 << 32) | objid::int8) = hashtext($1)::int8`, key).Scan(&pid); err != nil {
		t.Fatalf("the lock's session in pg_locks: %v", err)
	}
	if _, err := s.Pool().Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CleanupBatch(ctx, 0, 10); err == nil {
		t.Fatal("a cleanup whose session died deleted on: it could overlap the next holder's")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		next, ok, err := s.LockCleanup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			next.Unlock()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock of a terminated session is still held after 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
