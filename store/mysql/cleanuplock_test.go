package mysql_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/txbox/txbox/store/mysql"
)

// A cleanup lock whose session dies is free for the next relay at once, and
// the cleanup that held it cannot go on beside the next one: its next batch
// fails, because the lock and the deletes share the session.
func TestCleanupLockEndsWithItsSession(t *testing.T) {
	s := OpenTest(t, mysql.Options{})
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, ok, err := s.LockCleanup(ctx)
	if err != nil || !ok {
		t.Fatalf("lock: ok %v, %v", ok, err)
	}
	defer c.Unlock() // on a dead session: must neither hang nor panic
	sum := sha256.Sum256([]byte(s.Tables().Qualified(s.Tables().Outbox)))
	var id int64
	if err := s.DB().QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", "txbox-cleanup-"+hex.EncodeToString(sum[:16])).Scan(&id); err != nil {
		t.Fatalf("the lock's session: %v", err)
	}
	if _, err := s.DB().ExecContext(ctx, "KILL ?", id); err != nil {
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
			t.Fatal("the lock of a killed session is still held after 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
