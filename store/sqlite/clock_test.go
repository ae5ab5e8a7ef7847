package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
)

// TestOptionsNowIsTheClock: leases, retry delays, sent_at, stats ages and
// cleanup cut-offs all read Options.Now, not the host clock behind it. The
// store's clock runs 10 hours ahead; every time it writes or compares with
// must be 10 hours ahead too.
func TestOptionsNowIsTheClock(t *testing.T) {
	const ahead = 10 * time.Hour
	clock := new(storeenv.Clock)
	clock.Jump(ahead)
	s := OpenTest(t, sqlite.Options{Now: clock.Now})
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := txbox.MustEvent("Order", "a", "E", nil), txbox.MustEvent("Order", "b", "E", nil)
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.NewWriter(s.Dialect()).Add(ctx, store.SQLTx(tx), a, b); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// around checks that got is the store's clock plus d at the moment of
	// the call (start..end are host times around it).
	around := func(what string, got *time.Time, start, end time.Time, d time.Duration) {
		t.Helper()
		lo, hi := start.Add(ahead+d-time.Millisecond), end.Add(ahead+d+time.Millisecond)
		if got == nil || got.Before(lo) || got.After(hi) {
			t.Errorf("%s = %v, want between %v and %v (the store's clock)", what, got, lo, hi)
		}
	}

	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.OldestAge < ahead || st.OldestAge > ahead+time.Minute {
		t.Errorf("stats age %v, want about %v (created on the host clock, aged on the store's)", st.OldestAge, ahead)
	}

	start := time.Now()
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
	end := time.Now()
	if err != nil || len(recs) != 2 {
		t.Fatalf("claim: %d rows, %v", len(recs), err)
	}
	around("locked_until", recs[0].LockedUntil, start, end, time.Minute)

	start = time.Now()
	n, err := s.MarkFailed(ctx, "L", []store.Failure{{ID: recs[1].ID, Error: "later", Delay: time.Second}})
	end = time.Now()
	if err != nil || n != 1 {
		t.Fatalf("mark failed: %d, %v", n, err)
	}
	start2 := time.Now()
	n, err = s.MarkSent(ctx, "L", []int64{recs[0].ID})
	end2 := time.Now()
	if err != nil || n != 1 {
		t.Fatalf("mark sent: %d, %v", n, err)
	}
	got, err := s.List(ctx, store.Filter{EventIDs: []string{a.ID, b.ID}})
	if err != nil || len(got) != 2 {
		t.Fatalf("list: %d, %v", len(got), err)
	}
	around("sent_at", got[0].SentAt, start2, end2, 0)
	around("next_retry_at", got[1].NextRetryAt, start, end, time.Second)

	// Two hours later on the store's clock, the row sent is 2 h old: a 1 h
	// cut-off takes it. On the host clock it would be 8 h in the future.
	clock.Jump(2 * time.Hour)
	if n, err := s.CountCleanup(ctx, 3*time.Hour); err != nil || n != 0 {
		t.Errorf("count cleanup 3h: %d, %v; want 0", n, err)
	}
	if n, err := s.CountCleanup(ctx, time.Hour); err != nil || n != 1 {
		t.Errorf("count cleanup 1h: %d, %v; want 1", n, err)
	}
	if n, err := s.CleanupBatch(ctx, time.Hour, 100); err != nil || n != 1 {
		t.Errorf("cleanup 1h: %d, %v; want 1", n, err)
	}
}
