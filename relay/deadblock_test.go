package relay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// TestDeadBlocks: with Account in DeadBlocks, on every store, with two
// relays on one table: a poison event in the middle of an Account
// aggregate goes DEAD and holds back every later event of it (also ones
// written afterwards) while the other aggregates flow, and an Order
// aggregate's DEAD event blocks nothing (the default); replaying the DEAD
// event delivers it and then the held ones in order; purging one releases
// the rest.
func TestDeadBlocks(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) { testDeadBlocks(t, be) })
	}
}

func testDeadBlocks(t *testing.T, be backend) {
	s := be.open(t)
	second := s // SQLite: one store, one writer
	if r, ok := be.h.(interface {
		Reopen(*testing.T, store.Store, string) store.Store
		URL(*testing.T, store.Store) string
	}); ok {
		second = r.Reopen(t, s, r.URL(t, s))
	}
	mem := membroker.New(membroker.Options{})
	ctx := context.Background()

	acct := func(id string, n int) txbox.Event {
		return txbox.MustEvent("Account", id, "Posted", map[string]int{"n": n})
	}
	var a1, a2, a3 []txbox.Event // a1: replayed; a3: purged; a2: clean
	for n := range 6 {
		a1 = append(a1, acct("acct-1", n))
		a2 = append(a2, acct("acct-2", n))
		a3 = append(a3, acct("acct-3", n))
	}
	o := []txbox.Event{txbox.MustEvent("Order", "ord-1", "E", nil), txbox.MustEvent("Order", "ord-1", "E", nil), txbox.MustEvent("Order", "ord-1", "E", nil)}
	mem.Refuse(a1[2].ID, true)
	mem.Refuse(a3[1].ID, true)
	mem.Refuse(o[1].ID, true)

	var evs []txbox.Event
	for i := range 6 {
		evs = append(evs, a1[i], a2[i], a3[i])
	}
	evs = append(evs, o...)
	storeenv.Write(t, be.h, s, evs...)
	cfg := relay.Config{Publisher: mem, Claims: be.claims, DeadBlocks: []string{"Account"}, BatchSize: 4, MetricsInterval: 100 * time.Millisecond}
	cfg.Store = s
	r1, _, _ := run(t, cfg)
	cfg.Store = second
	r2, _, _ := run(t, cfg)

	delivered := func() map[string][]string {
		out := map[string][]string{}
		seen := map[string]bool{}
		for _, m := range mem.Messages() {
			if !seen[m.Event.ID] { // first deliveries
				seen[m.Event.ID] = true
				out[m.Event.AggregateID] = append(out[m.Event.AggregateID], m.Event.ID)
			}
		}
		return out
	}
	ids := func(evs ...txbox.Event) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = e.ID
		}
		return out
	}
	same := func(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	dead := func() int {
		n, _ := s.Count(ctx, store.Filter{Status: txbox.StatusDead})
		return int(n)
	}

	testenv.WaitFor(t, time.Minute, "acct-2 delivered, three DEAD, the Order after its DEAD one delivered", func() bool {
		d := delivered()
		return same(d["acct-2"], ids(a2...)) && dead() == 3 && same(d["ord-1"], ids(o[0], o[2]))
	})
	late := acct("acct-1", 6)
	storeenv.Write(t, be.h, s, late)
	held := func() store.Blocked { return r1.Stats().Blocked }
	testenv.WaitFor(t, time.Minute, "the held rows sampled: acct-1 (a4..a6 and the late one) and acct-3 (a3..a6)", func() bool {
		b := held()
		return b.Aggregates == 2 && b.Rows == 8
	})
	// A few more claim rounds: nothing of acct-1 past a2, nothing of acct-3
	// past a1, whichever relay claims.
	time.Sleep(500 * time.Millisecond)
	d := delivered()
	if !same(d["acct-1"], ids(a1[:2]...)) || !same(d["acct-3"], ids(a3[:1]...)) {
		t.Fatalf("events behind a DEAD Account event were delivered:\n acct-1 %v\n want   %v\n acct-3 %v\n want   %v", d["acct-1"], ids(a1[:2]...), d["acct-3"], ids(a3[:1]...))
	}
	if st1, st2 := r1.Stats(), r2.Stats(); st1.Held+st2.Held < 2 {
		t.Fatalf("relays counted %d held marks, want at least one per blocked aggregate", st1.Held+st2.Held)
	}

	// The operator fixes the cause and replays acct-1's DEAD event: it is
	// delivered first, then the held ones, in order.
	mem.Refuse(a1[2].ID, false)
	if n, err := s.Replay(ctx, store.Filter{EventIDs: []string{a1[2].ID}}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	want := append(ids(a1...), late.ID)
	testenv.WaitFor(t, time.Minute, "acct-1 delivered in order after the replay", func() bool { return len(delivered()["acct-1"]) == len(want) })
	if got := delivered()["acct-1"]; !same(got, want) {
		t.Fatalf("acct-1 after the replay:\n got  %v\n want %v", got, want)
	}

	// Purging acct-3's DEAD event releases the rest, in order.
	if n, err := s.Purge(ctx, store.Filter{EventIDs: []string{a3[1].ID}}); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	want = append(ids(a3[0]), ids(a3[2:]...)...)
	testenv.WaitFor(t, time.Minute, "acct-3 delivered after the purge", func() bool { return len(delivered()["acct-3"]) == len(want) })
	if got := delivered()["acct-3"]; !same(got, want) {
		t.Fatalf("acct-3 after the purge:\n got  %v\n want %v", got, want)
	}
	testenv.WaitFor(t, time.Minute, "nothing held", func() bool { b := held(); return b.Rows == 0 && b.Aggregates == 0 })
	if n := dead(); n != 1 {
		t.Fatalf("%d DEAD rows left, want 1 (the Order one)", n)
	}
}

// TestDeadBlocksConfig: bad lists, and a store without store.DeadBlocker,
// are refused naming DeadBlocks.
func TestDeadBlocksConfig(t *testing.T) {
	s := openPG(t)
	for _, bad := range [][]string{{""}, {"*", "Order"}} {
		_, err := relay.New(relay.Config{Store: s, Publisher: membroker.New(membroker.Options{}), DeadBlocks: bad})
		var ce *txbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != "DeadBlocks" {
			t.Fatalf("DeadBlocks %q: %v, want a config error naming DeadBlocks", bad, err)
		}
	}
	_, err := relay.New(relay.Config{Store: struct{ store.Outbox }{s}, Publisher: membroker.New(membroker.Options{}), DeadBlocks: []string{"Order"}})
	var ce *txbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "DeadBlocks" {
		t.Fatalf("a store without DeadBlocker: %v, want a config error naming DeadBlocks", err)
	}
}

// A relay whose list no longer names a type (the operator took it off
// --dead-blocks, or dropped the flag) releases the rows held behind that
// type's DEAD events, and delivers them.
func TestRelayReleasesRowsHeldForTypesItDoesNotBlock(t *testing.T) {
	for _, list := range [][]string{nil, {"Order"}} {
		t.Run(fmt.Sprint(list), func(t *testing.T) {
			s := openPG(t)
			poison, next := txbox.MustEvent("Account", "a-1", "Posted", nil), txbox.MustEvent("Account", "a-1", "Posted", nil)
			write(t, s, poison, next)
			storeenv.Block(t, s, poison, next)
			mem := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: s, Publisher: mem, DeadBlocks: list, MetricsInterval: 50 * time.Millisecond})
			testenv.WaitFor(t, time.Minute, "the held event delivered", func() bool { return len(mem.Messages()) == 1 })
			if got := mem.Messages()[0].Event.ID; got != next.ID {
				t.Fatalf("delivered %s, want the held event %s", got, next.ID)
			}
			if b := r.Stats().Blocked; b.Rows != 0 {
				t.Fatalf("blocked after the release: %+v", b)
			}
		})
	}
}
