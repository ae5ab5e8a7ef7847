package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// streamRecs is a change stream: n events over the aggregates, interleaved,
// ids 1..n in stream order.
func streamRecs(n int, aggs ...string) []store.Record {
	recs := make([]store.Record, n)
	for i := range recs {
		p, _ := json.Marshal(map[string]int{"i": i})
		recs[i] = store.Record{ID: int64(i + 1), EventID: txbox.NewID(), AggregateType: "Order", AggregateID: aggs[i%len(aggs)],
			EventType: "E", Payload: p, Status: txbox.StatusPending, CreatedAt: time.Now()}
	}
	return recs
}

func streamRelay(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	cfg.Store = openPG(t)
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With a publisher that keeps per-key order in flight, the broker receives
// the stream exactly in its order, across aggregates.
func TestDeliverOrderedKeepsStreamOrder(t *testing.T) {
	b := membroker.New(membroker.Options{})
	r := streamRelay(t, relay.Config{Publisher: b})
	recs := streamRecs(300, "a", "b", "a", "c", "a")
	out, err := r.DeliverOrdered(context.Background(), recs)
	if err != nil || len(out.Sent) != 300 || len(out.Dead) != 0 {
		t.Fatalf("sent %d dead %d err %v", len(out.Sent), len(out.Dead), err)
	}
	msgs := b.Messages()
	for i, m := range msgs {
		if m.Event.ID != recs[i].EventID {
			t.Fatalf("message %d is not the stream's event %d", i, i)
		}
	}
}

// Without per-key pipelining a round holds one event per aggregate; an
// outage retries (past MaxAttempts: an outage never dead-letters) and the
// aggregate's order of first delivery holds; a permanent failure is dead
// and the stream goes on.
func TestDeliverOrderedRetriesAndDeadLetters(t *testing.T) {
	b := membroker.New(membroker.Options{MaxPayload: 100})
	f := &faulty{Publisher: b, fail: map[string]bool{"down": true}}
	r := streamRelay(t, relay.Config{Publisher: f, MaxAttempts: 2, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	recs := streamRecs(60, "down", "up-1", "up-2")
	big := &recs[4] // aggregate up-2
	big.Payload = []byte(`{"pad":"` + strings.Repeat("x", 200) + `"}`)
	go func() {
		time.Sleep(300 * time.Millisecond)
		f.mu.Lock()
		f.fail = nil
		f.mu.Unlock()
	}()
	out, err := r.DeliverOrdered(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Dead) != 1 || out.Dead[0].ID != big.ID || !strings.Contains(out.Dead[0].Error, "permanent") {
		t.Fatalf("dead: %+v", out.Dead)
	}
	if len(out.Sent) != 59 {
		t.Fatalf("%d sent, want 59", len(out.Sent))
	}
	if st := r.Stats(); st.Deferred == 0 || st.Retried != 0 {
		t.Fatalf("deferred %d, retried %d: the outage must be retried without spending attempts", st.Deferred, st.Retried)
	}
	pos := map[string]int{}
	for i, rec := range recs {
		pos[rec.EventID] = i
	}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, m := range b.Messages() {
		if seen[m.Event.ID] {
			continue
		}
		seen[m.Event.ID] = true
		p := pos[m.Event.ID]
		if prev, ok := last[m.Event.AggregateID]; ok && p < prev {
			t.Fatalf("aggregate %s: #%d after #%d", m.Event.AggregateID, p, prev)
		}
		last[m.Event.AggregateID] = p
	}
	ids := slices.Clone(out.Sent)
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 59 {
		t.Fatal("an id was counted sent twice")
	}
}

// A cancelled context returns what was done with ctx's error.
func TestDeliverOrderedStopsWithContext(t *testing.T) {
	b := membroker.New(membroker.Options{})
	b.SetDown(true)
	r := streamRelay(t, relay.Config{Publisher: b, BackoffBase: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out, err := r.DeliverOrdered(ctx, streamRecs(5, "x"))
	if err == nil || len(out.Sent) != 0 {
		t.Fatalf("sent %d, err %v: want nothing and ctx's error", len(out.Sent), err)
	}
}

// A long stream costs time in proportion to its length: 30,000 events, two
// thirds of them on one aggregate, through a publisher that takes one
// event per aggregate per round (20,000 rounds). Rounds that each copied
// or scanned the whole rest took minutes here; the bound is generous.
func TestDeliverOrderedLongStreamIsLinear(t *testing.T) {
	b := membroker.New(membroker.Options{})
	f := &faulty{Publisher: b} // hides the broker's per-key pipelining
	r := streamRelay(t, relay.Config{Publisher: f})
	aggs := []string{"hot", "hot"}
	for i := range 1000 {
		aggs = append(aggs, "hot", "hot", fmt.Sprintf("cold-%d", i))
	}
	recs := streamRecs(30000, aggs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	out, err := r.DeliverOrdered(ctx, recs)
	if err != nil || len(out.Sent) != len(recs) {
		t.Fatalf("sent %d of %d in %v: %v", len(out.Sent), len(recs), time.Since(start), err)
	}
	t.Logf("%d events in %d rounds, %v", len(recs), f.calls.Load(), time.Since(start))
	pos := map[string]int{}
	for i, rec := range recs {
		pos[rec.EventID] = i
	}
	last := map[string]int{}
	for _, m := range b.Messages() {
		p := pos[m.Event.ID]
		if prev, ok := last[m.Event.AggregateID]; ok && p < prev {
			t.Fatalf("aggregate %s: #%d after #%d", m.Event.AggregateID, p, prev)
		}
		last[m.Event.AggregateID] = p
	}
}
