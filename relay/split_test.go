package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
)

// Two relays on one PostgreSQL table split its aggregates: each aggregate is
// delivered by one of them only, both deliver, and order holds. Unsplit
// (NoSplit), their claims take whatever the other does not hold at the
// moment, and aggregates pass from one relay to the other.
func TestTwoRelaysSplitAggregates(t *testing.T) {
	for _, noSplit := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSplit=%v", noSplit), func(t *testing.T) {
			a := storeenv.MigratedPostgres(t, postgres.Options{NoSplit: noSplit})
			b, err := postgres.New(a.Pool(), postgres.Options{Tables: a.Tables(), NoSplit: noSplit})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			ba, bb := membroker.New(membroker.Options{}), membroker.New(membroker.Options{})
			// Batches of 10 hold a quarter of the aggregates each, and a
			// publish takes 2 ms, so unsplit relays both find work.
			cfg := func(s *postgres.Store, p broker.Publisher) relay.Config {
				return relay.Config{Store: s, Publisher: slowPublisher{p, 2 * time.Millisecond}, BatchSize: 10, PollInterval: 5 * time.Millisecond}
			}
			ra, _, _ := run(t, cfg(a, ba))
			rb, _, _ := run(t, cfg(b, bb))
			// Both relays are members before the backlog exists (Run joins
			// before its first claim).
			testenv.WaitFor(t, time.Minute, "both relays claiming", func() bool {
				return ra.Stats().IdleWaits > 0 && rb.Stats().IdleWaits > 0
			})
			const aggs, per = 40, 30
			storeenv.Write(t, storeenv.Postgres{}, a, testenv.Backlog(aggs*per, aggs, "E")...)
			waitSent(t, a, aggs*per, 30*time.Second, "the backlog delivered")
			byA, byB := map[string]bool{}, map[string]bool{}
			for _, m := range ba.Messages() {
				byA[m.Event.AggregateID] = true
			}
			both := 0
			for _, m := range bb.Messages() {
				if !byB[m.Event.AggregateID] && byA[m.Event.AggregateID] {
					both++
				}
				byB[m.Event.AggregateID] = true
			}
			t.Logf("relay a: %d aggregates, relay b: %d, delivered by both: %d", len(byA), len(byB), both)
			if noSplit {
				if both == 0 {
					t.Fatalf("unsplit relays never shared an aggregate: the test cannot tell a split from luck")
				}
				return
			}
			if both > 0 || len(byA) == 0 || len(byB) == 0 {
				t.Fatalf("split relays: a delivered %d aggregates, b %d, %d by both; want disjoint shares", len(byA), len(byB), both)
			}
			// Each aggregate went through one broker, so each broker's
			// messages hold its whole order.
			checkOrder(t, ba.Messages(), distinct(ba.Messages()))
			checkOrder(t, bb.Messages(), aggs*per-distinct(ba.Messages()))
		})
	}
}

// slowPublisher takes d for every publish round.
type slowPublisher struct {
	broker.Publisher
	d time.Duration
}

func (p slowPublisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	time.Sleep(p.d)
	return p.Publisher.Publish(ctx, msgs)
}

func distinct(msgs []broker.Message) int {
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[m.Event.ID] = true
	}
	return len(ids)
}
