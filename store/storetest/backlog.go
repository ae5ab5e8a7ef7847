package storetest

import (
	"testing"
	"time"

	"github.com/txbox/txbox/store"
)

// testBacklog: the sampler behind the relay's backlog gauges counts unsent
// rows per status and DEAD rows, leaves SENT rows out, and ages the oldest
// unsent row.
func testBacklog(t *testing.T, h Harness) {
	s := open(t, h)
	bs, ok := s.(store.BacklogSampler)
	if !ok {
		t.Fatalf("%T does not implement store.BacklogSampler", s)
	}
	ctx := ctxT(t)
	b, err := bs.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b != (store.Backlog{}) {
		t.Fatalf("empty table backlog: %+v", b)
	}
	write(t, h, s, ev("a", 1), ev("b", 1), ev("c", 1), ev("d", 1), ev("e", 1))
	time.Sleep(50 * time.Millisecond)
	got := claim(t, s, "L", 3, time.Minute)
	mustMark(t, must(s.MarkSent(ctx, "L", []int64{got[0].ID})), nil, 1, "sent")
	mustMark(t, must(s.MarkFailed(ctx, "L", []store.Failure{{ID: got[1].ID, Dead: true, Error: "x"}})), nil, 1, "dead")
	mustMark(t, must(s.MarkFailed(ctx, "L", []store.Failure{{ID: got[2].ID, Delay: time.Hour, Error: "y"}})), nil, 1, "retry")
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
