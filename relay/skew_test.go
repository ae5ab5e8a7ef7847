package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
)

// A backlog crowded onto few aggregates drains without waiting for a poll:
// a claim that comes back short because the relay's own batch in flight
// holds the aggregates waits for that batch to end, not for the poll
// interval. With a one-hour poll and no wake-ups the backlog must drain
// with exactly one idle wait, the one after it is empty. Before, the second
// worker's empty claim slept the whole poll interval and this timed out.
func TestSkewedBacklogDrainsWithoutPolling(t *testing.T) {
	const total = 600
	for _, c := range backends() {
		for _, aggs := range []int{1, 10} {
			t.Run(fmt.Sprintf("%s/%d-aggregates", c.name, aggs), func(t *testing.T) {
				ctx := context.Background()
				s := c.open(t)
				storeenv.Write(t, c.h, s, testenv.Backlog(total, aggs, "E")...)
				b := membroker.New(membroker.Options{})
				r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: c.claims,
					PollInterval: time.Hour, Lease: time.Hour})
				testenv.WaitFor(t, 30*time.Second, "the backlog delivered, marked, and the relay idle", func() bool {
					st, _ := s.Stats(ctx)
					return st.Counts[txbox.StatusSent] == total && r.Stats().IdleWaits > 0
				})
				st := r.Stats()
				if st.IdleWaits != 1 {
					t.Fatalf("%d idle waits, want 1 (only once the backlog is gone)", st.IdleWaits)
				}
				if st.Published != total || st.Errors != 0 {
					t.Fatalf("stats %+v", st)
				}
				checkOrder(t, b.Messages(), total)
				t.Logf("batch waits %d, claims %v", st.BatchWaits, st.ClaimTime)
			})
		}
	}
}

// checkOrder fails unless msgs hold n distinct events and each aggregate's
// first deliveries come in the order they were written (payload "i"
// ascending).
func checkOrder(t *testing.T, msgs []broker.Message, n int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, m := range msgs {
		if seen[m.Event.ID] {
			continue // a redelivery: only first deliveries must be in order
		}
		seen[m.Event.ID] = true
		var p struct{ I int }
		if err := json.Unmarshal(m.Event.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[m.Event.AggregateID]; ok && p.I <= prev {
			t.Fatalf("aggregate %s: event %d first delivered after %d", m.Event.AggregateID, p.I, prev)
		}
		last[m.Event.AggregateID] = p.I
	}
	if len(seen) != n {
		t.Fatalf("%d distinct events delivered, want %d", len(seen), n)
	}
}
