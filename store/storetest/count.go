package storetest

import (
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

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
