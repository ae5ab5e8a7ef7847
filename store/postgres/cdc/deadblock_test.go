package cdc_test

import (
	"context"
	"testing"
	"time"

	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// Blocking dead letters in CDC mode (relay.Config.DeadBlocks): an event
// the broker refuses for good goes DEAD and holds back the later events of
// its aggregate, rows and tableless events alike, also ones written
// afterwards, while other aggregates go on; replaying the DEAD event (once
// the broker takes it) delivers it and then the held ones, in order, and
// purging one releases the rest.
func TestDeadBlocksInCDCMode(t *testing.T) {
	e := newEnv(t)
	b := membroker.New(membroker.Options{})
	e.start(e.slot(), b, func(c *cdc.Config) { c.Relay.DeadBlocks = []string{"order"} })
	// r: replayed later; p: purged later; c: clean.
	r1, p1 := ev("r", 1), ev("p", 1)
	b.Refuse(r1.ID, true)
	b.Refuse(p1.ID, true)
	e.write(false, ev("r", 0), ev("p", 0), ev("c", 0))
	e.write(false, r1, p1)
	e.write(true, ev("r", 2), ev("c", 1)) // tableless
	e.write(false, ev("r", 3), ev("p", 2), ev("c", 2))
	testenv.WaitFor(t, time.Minute, "c's three events and the first of r and p delivered, two DEAD", func() bool {
		f, _ := firsts(b.Messages())
		return len(f) == 5 && e.countRows("DEAD") == 2
	})
	e.write(false, ev("r", 4)) // written after r1 went DEAD: held too
	testenv.WaitFor(t, time.Minute, "r2 (tableless), r3, r4 and p2 held", func() bool { return e.countRows("RETRY") == 4 })
	time.Sleep(300 * time.Millisecond)
	if f, _ := firsts(b.Messages()); len(f) != 5 {
		t.Fatalf("%d events delivered, want 5: an event behind a DEAD one went out", len(f))
	}

	// The cause fixed, the broker takes r1 now.
	b.Refuse(r1.ID, false)
	ctx := context.Background()
	if n, err := e.s.Replay(ctx, store.Filter{EventIDs: []string{r1.ID}}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	if n, err := e.s.Purge(ctx, store.Filter{EventIDs: []string{p1.ID}}); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	got, _ := waitFirsts(t, b.Messages, time.Minute, "every event but the purged one", 10)
	next := map[string]int{}
	for _, m := range got {
		agg, n := seq(m)
		if agg == "p" && n == 2 && next["p"] == 1 {
			next["p"] = 2 // p1 was purged
		}
		if n != next[agg] {
			t.Fatalf("aggregate %s: event %d arrived when %d was due", agg, n, next[agg])
		}
		next[agg]++
	}
	if next["r"] != 5 || next["p"] != 3 || next["c"] != 3 {
		t.Fatalf("delivered %v, want r 0-4, p 0 and 2, c 0-2", next)
	}
	testenv.WaitFor(t, time.Minute, "nothing held or dead left", func() bool { return e.countRows("RETRY") == 0 && e.countRows("DEAD") == 0 })
}
