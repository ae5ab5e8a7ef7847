package testenv

import (
	"fmt"
	"testing"

	"github.com/txbox/txbox"
)

// Backlog returns n events of type typ spread round-robin over the
// aggregates "o-0" .. "o-<aggs-1>" of type Order, each with the payload
// {"i": its index}, so that a test can check each aggregate's order by
// payload or against the slice.
func Backlog(n, aggs int, typ string) []txbox.Event {
	evs := make([]txbox.Event, n)
	for i := range evs {
		evs[i] = txbox.MustEvent("Order", fmt.Sprintf("o-%d", i%aggs), typ, map[string]int{"i": i})
	}
	return evs
}

// Interleaved returns n events "E" for each of aggs (aggregates of type
// aggType), interleaved: the first of every aggregate, then the second, and
// so on; each has the payload {"i": its index within its aggregate}.
func Interleaved(aggType string, n int, aggs ...string) []txbox.Event {
	var evs []txbox.Event
	for i := range n {
		for _, a := range aggs {
			evs = append(evs, txbox.MustEvent(aggType, a, "E", map[string]int{"i": i}))
		}
	}
	return evs
}

// FirstOrder fails t unless, within each aggregate, the first delivery of
// every event of written comes in the order written. delivered is in
// arrival order and key gives a delivery's event id and aggregate id;
// deliveries of events not in written are passed over. It returns how many
// of written were delivered and how many deliveries were extra copies.
func FirstOrder[D any](t testing.TB, what string, written []txbox.Event, delivered []D, key func(D) (id, aggregate string)) (distinct, extra int) {
	t.Helper()
	pos := map[string]int{}
	for i, e := range written {
		pos[e.ID] = i
	}
	first := map[string]bool{}
	last := map[string]int{}
	for _, d := range delivered {
		id, agg := key(d)
		p, ours := pos[id]
		if !ours {
			continue
		}
		if first[id] {
			extra++
			continue
		}
		first[id] = true
		if prev, ok := last[agg]; ok && p < prev {
			t.Fatalf("%s: ORDER VIOLATION in aggregate %s: event #%d first delivered after #%d", what, agg, p, prev)
		}
		last[agg] = p
	}
	return len(first), extra
}
