package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// grid returns perAgg events for each of aggs aggregates named prefix0,
// prefix1, ..., interleaved: the first event of every aggregate, then the
// second, and so on.
func grid(prefix string, aggs, perAgg int) []txbox.Event {
	var in []txbox.Event
	for n := range perAgg {
		for a := range aggs {
			in = append(in, ev(fmt.Sprintf("%s%d", prefix, a), n))
		}
	}
	return in
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
