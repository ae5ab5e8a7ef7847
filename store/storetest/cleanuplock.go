package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox/store"
)

// testCleanupLock: one cleanup at a time for a store's tables. A second
// session is refused while the first holds the lock, the holder's Cleaner
// deletes, the lock is free again after Unlock, and sessions racing for it
// never hold it two at once.
func testCleanupLock(t *testing.T, h Harness) {
	s := open(t, h)
	l := as[store.CleanupLocker](t, s)
	ctx := ctxT(t)
	sentRows(t, h, s, 10)

	c, ok, err := l.LockCleanup(ctx)
	if err != nil || !ok {
		t.Fatalf("first lock: ok %v, %v", ok, err)
	}
	// A failed case still gives the session back: a store's Close waits
	// for its connections.
	held := c
	defer func() {
		if held != nil {
			held.Unlock()
		}
	}()
	for range 3 {
		if other, ok, err := l.LockCleanup(ctx); err != nil || ok {
			if ok {
				other.Unlock()
			}
			t.Fatalf("second lock while the first is held: ok %v, %v", ok, err)
		}
	}
	if n, err := store.Cleanup(ctx, c, 0, 4); err != nil || n != 10 {
		t.Fatalf("cleanup under the lock: %d rows, %v; want 10", n, err)
	}
	if _, isInbox := s.(store.InboxAdmin); isInbox {
		if n, err := store.InboxCleanup(ctx, c, time.Hour, 4); err != nil || n != 0 {
			t.Fatalf("inbox cleanup under the lock: %d rows, %v", n, err)
		}
	}
	c.Unlock()
	held = nil
	c, ok, err = l.LockCleanup(ctx)
	if err != nil || !ok {
		t.Fatalf("lock after Unlock: ok %v, %v", ok, err)
	}
	c.Unlock()

	var holders, most, taken atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				c, ok, err := l.LockCleanup(ctx)
				if err != nil {
					t.Errorf("racing lock: %v", err)
					return
				}
				if !ok {
					continue
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				taken.Add(1)
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				c.Unlock()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 || taken.Load() < 2 {
		t.Fatalf("racing sessions: at most %d held the lock at once (want 1), %d turns (want 2 or more)", most.Load(), taken.Load())
	}
}
