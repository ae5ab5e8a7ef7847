package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// ClockHarness is a Harness that can move the clock its stores' leases are
// measured by. Every lease store's harness is one: ClockJumpWhileLeased
// fails for a harness that is not.
type ClockHarness interface {
	Harness
	// JumpClock makes s see its clock moved by d (forward when d > 0): a
	// store that reads a clock of its own (SQLite's Options.Now) moves that
	// clock; a store on the database server's clock moves the rows instead,
	// their locked_until and next_retry_at by -d, which is the same thing as
	// far as every lease and retry decision goes.
	JumpClock(t *testing.T, s store.Store, d time.Duration)
}

// testClockJumpWhileLeased: the relay host's clock jumps while leases are
// held. Forward: the leases look expired, another holder takes the rows in
// order, and the first holder's late marks change nothing (fencing, not the
// clock, keeps each row SENT once). Back: a live lease looks longer, so
// nobody takes it early; once it really ended, the rows move on, each SENT
// exactly once.
func testClockJumpWhileLeased(t *testing.T, h Harness) {
	ch, ok := h.(ClockHarness)
	if !ok {
		t.Fatalf("%T cannot move its store's clock: every lease store's harness must implement storetest.ClockHarness", h)
	}
	s := open(t, h)
	ctx := ctxT(t)
	const lease = time.Minute // long: only the jumps end it, never the real clock
	evs := []txbox.Event{ev("a", 1), ev("a", 2), ev("a", 3), ev("b", 1), ev("b", 2)}
	write(t, h, s, evs...)

	held := claim(t, s, "A", 10, lease)
	if len(held) != len(evs) {
		t.Fatalf("A claimed %d rows, want %d", len(held), len(evs))
	}
	if got := claim(t, s, "B", 10, lease); len(got) != 0 {
		t.Fatalf("B took %d rows under A's live lease", len(got))
	}

	ch.JumpClock(t, s, 2*lease)
	taken := claim(t, s, "B", 10, lease)
	if !slices.Equal(ids(taken), ids(held)) {
		t.Fatalf("after the jump forward B took %v, want A's rows in order %v", ids(taken), ids(held))
	}
	n, err := s.MarkSent(ctx, "A", ids(held))
	mustMark(t, n, err, 0, "A's MarkSent after losing the lease")
	n, err = s.MarkFailed(ctx, "A", []store.Failure{{ID: held[0].ID, Error: "late", Delay: time.Second}, {ID: held[3].ID, Error: "late", Dead: true}})
	mustMark(t, n, err, 0, "A's MarkFailed after losing the lease")
	n, err = s.Release(ctx, "A", ids(held))
	mustMark(t, n, err, 0, "A's Release after losing the lease")

	// B delivers the head of each aggregate; the rest stays leased to it.
	sent := map[int64]int{}
	markSent := func(holder string, recs ...store.Record) int64 {
		t.Helper()
		n, err := s.MarkSent(ctx, holder, ids(recs))
		if err != nil {
			t.Fatalf("%s's MarkSent: %v", holder, err)
		}
		if n == int64(len(recs)) {
			for _, r := range recs {
				sent[r.ID]++
			}
		}
		return n
	}
	if n := markSent("B", taken[0], taken[3]); n != 2 {
		t.Fatalf("B's MarkSent of the heads changed %d rows, want 2", n)
	}

	ch.JumpClock(t, s, -time.Hour)
	if got := claim(t, s, "C", 10, lease); len(got) != 0 {
		t.Fatalf("after the jump back C took %d rows of B's live lease", len(got))
	}
	if n := markSent("A", held[1]); n != 0 {
		t.Fatalf("A's MarkSent after the jump back changed %d rows", n)
	}

	// B's lease really ends: the clock is back where it was, and past it.
	ch.JumpClock(t, s, time.Hour+2*lease)
	rest := claim(t, s, "C", 10, lease)
	want := []int64{held[1].ID, held[2].ID, held[4].ID}
	if !slices.Equal(ids(rest), want) {
		t.Fatalf("once B's lease ended C took %v, want the unsent rows in order %v", ids(rest), want)
	}
	if n := markSent("B", taken...); n != 0 {
		t.Fatalf("B's MarkSent after losing the lease changed %d rows", n)
	}
	if n := markSent("C", rest...); n != int64(len(rest)) {
		t.Fatalf("C's MarkSent changed %d rows, want %d", n, len(rest))
	}
	all, err := s.List(ctx, store.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(evs) {
		t.Fatalf("%d rows listed, want %d", len(all), len(evs))
	}
	for _, r := range all {
		if r.Status != txbox.StatusSent || sent[r.ID] != 1 {
			t.Errorf("row %d (%s/%s): status %s, marked SENT %d times; want SENT once", r.ID, r.AggregateID, r.EventID, r.Status, sent[r.ID])
		}
	}
}
