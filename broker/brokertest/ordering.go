package brokertest

import (
	"fmt"
	"testing"

	"github.com/txbox/txbox/broker"
)

// testOrderPerKey: 200 messages over 5 keys, published in four calls,
// arrive in publish order per key.
func testOrderPerKey(t *testing.T, h Harness) {
	p, topic, s := needs(t, h, "OrderPerKey", func(c Capabilities) bool { return c.OrderPerKey })
	const total, keys, calls = 200, 5, 4
	order := map[string]int{} // event id -> position within its key
	var all []broker.Message
	for i := range total {
		k := fmt.Sprintf("agg-%d", i%keys)
		e := event(k, i)
		order[e.ID] = i / keys
		all = append(all, message(topic, e))
	}
	var parts [][]broker.Message
	for c := range calls {
		parts = append(parts, all[c*total/calls:(c+1)*total/calls])
	}
	wait := startPublish(t, h, p, parts...)
	last := map[string]int{}
	for _, d := range receive(t, s, total, true) {
		e := decode(t, d)
		pos, ok := order[e.ID]
		if !ok {
			t.Fatalf("unknown event %s", e.ID)
		}
		if prev, seen := last[e.AggregateID]; seen && pos <= prev {
			t.Fatalf("key %s: message #%d arrived after #%d", e.AggregateID, pos, prev)
		}
		last[e.AggregateID] = pos
	}
	wait(false)
	for k, pos := range last {
		if pos != total/keys-1 {
			t.Errorf("key %s: last message #%d, want #%d", k, pos, total/keys-1)
		}
	}
}
