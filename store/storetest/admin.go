package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// The operator's side of a store, what the console and the CLI read and
// change: Stats, Backlog, List's keyset pages, Count, Replay, Purge and
// Cleanup.

func testStats(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.OldestPending != nil || st.Dead != 0 || len(st.Counts) != 0 {
		t.Fatalf("empty table stats: %+v", st)
	}
	writeMixed(t, h, s)
	st = mixedStats(t, s)
	if st.Dead != 1 || st.OldestPending == nil || st.OldestAge < 40*time.Millisecond || st.OldestAge > time.Minute {
		t.Fatalf("stats: dead %d oldest %v age %v", st.Dead, st.OldestPending, st.OldestAge)
	}
}

// writeMixed writes five events of five aggregates and, 50 ms later,
// leaves one SENT, one DEAD, one RETRY for an hour and two PENDING: what
// Stats and Backlog are checked against.
func writeMixed(t *testing.T, h Harness, s store.Store) {
	t.Helper()
	ctx := ctxT(t)
	write(t, h, s, ev("a", 1), ev("b", 1), ev("c", 1), ev("d", 1), ev("e", 1))
	time.Sleep(50 * time.Millisecond)
	got := claim(t, s, "L", 3, time.Minute)
	mustMark(t, must(s.MarkSent(ctx, "L", []int64{got[0].ID})), nil, 1, "sent")
	mustMark(t, must(s.MarkFailed(ctx, "L", []store.Failure{{ID: got[1].ID, Dead: true, Error: "x"}})), nil, 1, "dead")
	mustMark(t, must(s.MarkFailed(ctx, "L", []store.Failure{{ID: got[2].ID, Delay: time.Hour, Error: "y"}})), nil, 1, "retry")
}

// mixedStats reads Stats and checks its counts are those of one SENT, one
// DEAD, one RETRY and two PENDING rows (what writeMixed leaves).
func mixedStats(t *testing.T, s store.Store) store.Stats {
	t.Helper()
	st, err := s.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[txbox.Status]int64{txbox.StatusSent: 1, txbox.StatusDead: 1, txbox.StatusRetry: 1, txbox.StatusPending: 2}
	for k, v := range want {
		if st.Counts[k] != v {
			t.Fatalf("count %s = %d, want %d (all: %v)", k, st.Counts[k], v, st.Counts)
		}
	}
	return st
}

// cleanupFuncs are a cleanup's one batch and its loop over batches (the
// outbox's or the inbox's).
type cleanupFuncs struct {
	batch func(ctx context.Context, age time.Duration, limit int) (int64, error)
	loop  func(ctx context.Context, age time.Duration, limit int) (int64, error)
}

// checkCleanup checks a cleanup of due rows in batches of limit: rows
// younger than an hour stay, one batch deletes exactly its limit when more
// rows are due (the core's loop stops at the first short batch), and the
// loop deletes the rest.
func checkCleanup(t *testing.T, c cleanupFuncs, due, limit int) {
	t.Helper()
	ctx := ctxT(t)
	if n, err := c.loop(ctx, time.Hour, limit); err != nil || n != 0 {
		t.Fatalf("cleanup of young rows: %d %v", n, err)
	}
	time.Sleep(20 * time.Millisecond)
	if n, err := c.batch(ctx, 10*time.Millisecond, limit); err != nil || n != int64(limit) {
		t.Fatalf("cleanup batch (limit %d) of %d due rows: %d %v, want %d", limit, due, n, err, limit)
	}
	if n, err := c.loop(ctx, 10*time.Millisecond, limit); err != nil || n != int64(due-limit) {
		t.Fatalf("cleanup: %d %v, want the other %d in batches of %d", n, err, due-limit, limit)
	}
}

func testCleanup(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	sentRows(t, h, s, 20)
	write(t, h, s, grid("b", 5, 1)...)
	checkCleanup(t, cleanupFuncs{s.CleanupBatch, func(ctx context.Context, age time.Duration, limit int) (int64, error) {
		return store.Cleanup(ctx, s, age, limit)
	}}, 20, 7)
	st, _ := s.Stats(ctx)
	if st.Counts[txbox.StatusSent] != 0 || st.Counts[txbox.StatusProcessing]+st.Counts[txbox.StatusPending] != 5 {
		t.Fatalf("after cleanup: %v", st.Counts)
	}
}

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

// testBacklog: the sampler behind the relay's backlog gauges counts unsent
// rows per status and DEAD rows, leaves SENT rows out, and ages the oldest
// unsent row.
func testBacklog(t *testing.T, h Harness) {
	s := open(t, h)
	bs := as[store.BacklogSampler](t, s)
	ctx := ctxT(t)
	b, err := bs.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b != (store.Backlog{}) {
		t.Fatalf("empty table backlog: %+v", b)
	}
	writeMixed(t, h, s)
	claim(t, s, "M", 1, time.Minute) // one row PROCESSING
	b, err = bs.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Pending != 1 || b.Retry != 1 || b.Processing != 1 || b.Dead != 1 || b.Unsent() != 3 {
		t.Fatalf("backlog %+v, want pending 1 retry 1 processing 1 dead 1", b)
	}
	if b.OldestAge < 40*time.Millisecond || b.OldestAge > time.Minute {
		t.Fatalf("oldest age %v", b.OldestAge)
	}
}

func testDeadReplay(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2 := ev("a", 1), ev("a", 2)
	write(t, h, s, a1, a2)
	got := claim(t, s, "L", 1, time.Minute)
	n, err := s.MarkFailed(ctx, "L", []store.Failure{{ID: got[0].ID, Error: "poison: subject invalid", Dead: true}})
	mustMark(t, n, err, 1, "dead")
	next := claim(t, s, "L", 10, time.Minute)
	if len(next) != 1 || next[0].EventID != a2.ID {
		t.Fatalf("a DEAD row must not block its aggregate; got %v", eventIDs(next))
	}
	// a2 is delivered before the replay: a store may queue a replayed row
	// behind its aggregate's unsent rows (PostgreSQL gives it a new id).
	n, err = s.MarkSent(ctx, "L", ids(next))
	mustMark(t, n, err, 1, "sent")
	dead, err := s.List(ctx, store.Filter{Status: txbox.StatusDead})
	if err != nil || len(dead) != 1 || dead[0].EventID != a1.ID || dead[0].LastError != "poison: subject invalid" {
		t.Fatalf("dead list: %v %+v", err, dead)
	}
	// Filters: a non-matching filter replays nothing.
	if n, err := s.Replay(ctx, store.Filter{EventType: "Nope"}); err != nil || n != 0 {
		t.Fatalf("replay with non-matching filter: %d %v", n, err)
	}
	if n, err := s.Replay(ctx, store.Filter{Until: time.Now().Add(-time.Hour)}); err != nil || n != 0 {
		t.Fatalf("replay with time range before the row: %d %v", n, err)
	}
	// Replay never touches non-DEAD rows even if the filter matches them.
	n, err = s.Replay(ctx, store.Filter{EventIDs: []string{a1.ID, a2.ID}})
	mustMark(t, n, err, 1, "replay")
	back := claim(t, s, "L2", 10, time.Minute)
	if len(back) != 1 || back[0].EventID != a1.ID || back[0].RetryCount != 0 {
		t.Fatalf("replayed row must be claimable with a fresh budget and the same event id; got %+v", back)
	}
	n, err = s.MarkFailed(ctx, "L2", []store.Failure{{ID: back[0].ID, Error: "again", Dead: true}})
	mustMark(t, n, err, 1, "dead again")
	n, err = s.Purge(ctx, store.Filter{AggregateID: "a"})
	mustMark(t, n, err, 1, "purge")
	if dead, _ := s.List(ctx, store.Filter{Status: txbox.StatusDead}); len(dead) != 0 {
		t.Fatalf("purge left %d", len(dead))
	}
}

// testKeysetCount: the admin console pages dead rows by id (AfterID,
// BeforeID, Desc), filters on the error text, shows Count before a bulk
// action, and bounds the action by the highest id it counted.
func testKeysetCount(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	errs := []string{"boom: 50% off", "Boom_x", "timeout", "TIMEOUT again", "other", "boomxx"}
	var events []txbox.Event
	for i := range errs {
		events = append(events, ev(fmt.Sprintf("k%d", i), 1))
	}
	write(t, h, s, events...)
	// One row is delivered: Count, like List, reads the archive of SENT
	// rows where the store has one.
	write(t, h, s, ev("sent", 1))
	got := claim(t, s, "L", len(errs), time.Minute)
	if len(got) != len(errs) {
		t.Fatalf("claimed %d rows, want %d", len(got), len(errs))
	}
	var fs []store.Failure
	for i, r := range got {
		fs = append(fs, store.Failure{ID: r.ID, Error: errs[i], Dead: true})
	}
	n, err := s.MarkFailed(ctx, "L", fs)
	mustMark(t, n, err, int64(len(errs)), "dead")

	sent := claim(t, s, "S", 1, time.Minute)
	if len(sent) != 1 {
		t.Fatalf("claimed %d rows, want the one left", len(sent))
	}
	n, err = s.MarkSent(ctx, "S", ids(sent))
	mustMark(t, n, err, 1, "sent")

	dead := store.Filter{Status: txbox.StatusDead}
	all, err := s.List(ctx, dead)
	if err != nil || len(all) != len(errs) {
		t.Fatalf("list: %v, %d rows", err, len(all))
	}
	asc := ids(all)
	if !slices.IsSorted(asc) {
		t.Fatalf("List without Desc must be in id order: %v", asc)
	}

	page := func(f store.Filter) []int64 {
		t.Helper()
		recs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		return ids(recs)
	}
	f := dead
	f.Limit = 2
	f.AfterID = asc[1]
	if got := page(f); !slices.Equal(got, asc[2:4]) {
		t.Fatalf("AfterID page: %v, want %v", got, asc[2:4])
	}
	f = dead
	f.Limit, f.Desc, f.BeforeID = 2, true, asc[4]
	if got := page(f); !slices.Equal(got, []int64{asc[3], asc[2]}) {
		t.Fatalf("Desc BeforeID page: %v, want %v", got, []int64{asc[3], asc[2]})
	}
	f = dead
	f.Desc = true
	if got := page(f); got[0] != asc[len(asc)-1] {
		t.Fatalf("Desc must start at the highest id: %v", got)
	}

	for _, c := range []struct {
		text string
		want []string
	}{
		{"boom", []string{"boom: 50% off", "Boom_x", "boomxx"}},
		{"TIMEOUT", []string{"timeout", "TIMEOUT again"}},
		// LIKE wildcards in the text are literal.
		{"50%", []string{"boom: 50% off"}},
		{"m_x", []string{"Boom_x"}},
		{"nothing", nil},
	} {
		f := dead
		f.ErrorContains = c.text
		recs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("list ErrorContains %q: %v", c.text, err)
		}
		var gotErrs []string
		for _, r := range recs {
			gotErrs = append(gotErrs, r.LastError)
		}
		if !slices.Equal(gotErrs, c.want) {
			t.Fatalf("ErrorContains %q: %q, want %q", c.text, gotErrs, c.want)
		}
		if n, err := s.Count(ctx, f); err != nil || n != int64(len(c.want)) {
			t.Fatalf("Count ErrorContains %q: %d %v, want %d", c.text, n, err, len(c.want))
		}
	}

	for _, c := range []struct {
		f    store.Filter
		want int64
	}{
		{store.Filter{}, int64(len(errs)) + 1},
		{dead, int64(len(errs))},
		{store.Filter{Status: txbox.StatusSent}, 1},
		{store.Filter{Status: txbox.StatusPending}, 0},
		{store.Filter{Status: txbox.StatusDead, AfterID: asc[0], BeforeID: asc[3]}, 2},
		{store.Filter{Status: txbox.StatusDead, AggregateID: "k2"}, 1},
	} {
		if n, err := s.Count(ctx, c.f); err != nil || n != c.want {
			t.Fatalf("Count %+v: %d %v, want %d", c.f, n, err, c.want)
		}
	}

	// A bulk action bounded by the highest id counted leaves rows that
	// died after the count alone.
	bounded := store.Filter{Status: txbox.StatusDead, ErrorContains: "boom", BeforeID: asc[4] + 1}
	if n, err := s.Count(ctx, bounded); err != nil || n != 2 {
		t.Fatalf("bounded count: %d %v, want 2", n, err)
	}
	n, err = s.Replay(ctx, bounded)
	mustMark(t, n, err, 2, "bounded replay")
	n, err = s.Purge(ctx, store.Filter{ErrorContains: "boom", AfterID: asc[4]})
	mustMark(t, n, err, 1, "bounded purge")
	if n, err := s.Count(ctx, dead); err != nil || n != 3 {
		t.Fatalf("dead left: %d %v, want 3", n, err)
	}
}

// testCount: the counts behind --dry-run are exact: what Replay, Purge and
// Cleanup then change.
func testCount(t *testing.T, h Harness) {
	s := open(t, h)
	c := as[store.Counter](t, s)
	ctx := ctxT(t)
	write(t, h, s, grid("c", 12, 1)...)
	got := claim(t, s, "L", 12, time.Minute)
	var fails []store.Failure
	for _, r := range got[:5] {
		fails = append(fails, store.Failure{ID: r.ID, Error: "x", Dead: true})
	}
	mustMark(t, must(s.MarkFailed(ctx, "L", fails)), nil, 5, "dead")
	mustMark(t, must(s.MarkSent(ctx, "L", ids(got[5:9]))), nil, 4, "sent")
	mustMark(t, must(s.Release(ctx, "L", ids(got[9:]))), nil, 3, "released")

	dead := store.Filter{Status: txbox.StatusDead}
	for _, tc := range []struct {
		f    store.Filter
		want int64
	}{
		{dead, 5},
		{store.Filter{Status: txbox.StatusSent}, 4},
		{store.Filter{}, 12},
		{store.Filter{Status: txbox.StatusDead, AggregateID: got[0].AggregateID, Limit: 1}, 1},
		{store.Filter{Status: txbox.StatusDead, Since: time.Now().Add(time.Hour)}, 0},
	} {
		if n, err := s.Count(ctx, tc.f); err != nil || n != tc.want {
			t.Fatalf("Count(%+v) = %d, %v; want %d", tc.f, n, err, tc.want)
		}
	}
	if n, err := c.CountCleanup(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("CountCleanup(1h) = %d, %v; want 0", n, err)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := c.CountCleanup(ctx, 10*time.Millisecond)
	if err != nil || n != 4 {
		t.Fatalf("CountCleanup = %d, %v; want 4", n, err)
	}
	if deleted, err := store.Cleanup(ctx, s, 10*time.Millisecond, 100); err != nil || deleted != n {
		t.Fatalf("Cleanup deleted %d (%v), Count said %d", deleted, err, n)
	}
	if n, err := c.CountInboxCleanup(ctx, 0); err != nil || n != 0 {
		t.Fatalf("CountInboxCleanup on an empty inbox = %d, %v", n, err)
	}
	if purged, err := s.Purge(ctx, dead); err != nil || purged != 5 {
		t.Fatalf("Purge: %d %v, Count said 5", purged, err)
	}
}
