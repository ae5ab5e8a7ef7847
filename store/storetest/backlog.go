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
