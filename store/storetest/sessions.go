package storetest

import (
	"testing"
	"time"

	"github.com/txbox/txbox/store"
)

// SessionHarness is a Harness that can act on the store's database as
// other sessions do: hold a transaction open, as a report or a stuck
// session does, and kill the session that holds the cleanup lock.
type SessionHarness interface {
	Harness
	// HoldTransaction opens a transaction that holds back the cleanup of
	// row versions (a snapshot reading the outbox table) and returns its
	// end.
	HoldTransaction(t *testing.T, s store.Store) (end func())
	// KillCleanupHolder ends the database session that holds s's cleanup
	// lock (store.CleanupLocker), as an operator or a failover would.
	KillCleanupHolder(t *testing.T, s store.Store)
}

// RunSessions runs the cases that need other sessions on h's database.
func RunSessions(t *testing.T, h SessionHarness) {
	runCases(t, h, []testCase{
		{"CleanupLockEndsWithItsSession", testCleanupLockEndsWithItsSession},
		{"Horizon", testHorizon},
	})
}

// testCleanupLockEndsWithItsSession: a cleanup lock whose session dies is
// free for the next relay at once, and the cleanup that held it cannot go
// on beside the next one: its next batch fails, because the lock and the
// deletes share the session.
func testCleanupLockEndsWithItsSession(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	c, ok, err := as[store.CleanupLocker](t, s).LockCleanup(ctx)
	if err != nil || !ok {
		t.Fatalf("lock: ok %v, %v", ok, err)
	}
	defer c.Unlock() // on a dead session: must neither hang nor panic
	h.(SessionHarness).KillCleanupHolder(t, s)
	if _, err := c.CleanupBatch(ctx, 0, 10); err == nil {
		t.Fatal("a cleanup whose session died deleted on: it could overlap the next holder's")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		next, ok, err := s.(store.CleanupLocker).LockCleanup(ctx)
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

// testHorizon: a transaction held open elsewhere is seen by the store's
// HorizonSampler, with its age and its holder.
func testHorizon(t *testing.T, h Harness) {
	s := open(t, h)
	hs := as[store.HorizonSampler](t, s)
	sentRows(t, h, s, 20)
	end := h.(SessionHarness).HoldTransaction(t, s)
	time.Sleep(1100 * time.Millisecond)
	held, err := hs.Horizon(ctxT(t))
	end()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held: %+v", held)
	// Other tests share the server: a transaction of theirs may be older
	// than this one, but none can be younger and still the oldest.
	if held.OldestTransaction < time.Second || held.OldestTransaction > time.Hour || held.Holder == "" || held.DeadRows < 0 {
		t.Fatalf("a transaction held open for 1.1s: oldest %v, holder %q, dead rows %d", held.OldestTransaction, held.Holder, held.DeadRows)
	}
}

// sentRows writes n events of n aggregates, claims them and marks them
// SENT: rows for cleanup to delete.
func sentRows(t *testing.T, h Harness, s store.Store, n int) {
	t.Helper()
	write(t, h, s, grid("a", n, 1)...)
	got := claim(t, s, "L", n, time.Minute)
	mustMark(t, must(s.MarkSent(ctxT(t), "L", ids(got))), nil, int64(n), "sent")
}
