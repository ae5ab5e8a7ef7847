package storetest

import (
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// runDeadBlocks: the store side of blocking dead letters
// (store.DeadBlocker). A held row (RETRY past store.HeldAfter, marked as
// the relay marks it) holds back its aggregate's later rows, also ones
// written after it; Ahead finds the DEAD or unsent row in front of a row;
// Replay of the DEAD row puts it first and releases the held rows behind
// it, in their order; Purge releases them; ReleaseHeld keeps rows behind a
// DEAD row of a blocking type and releases the others.
func runDeadBlocks(t *testing.T, h Harness) {
	runCasesIf[store.DeadBlocker](t, h, "store has no blocking dead letters (store.DeadBlocker)", []testCase{
		{"HeldRowsWaitForReplay", testDeadBlocksReplay},
		{"PurgeReleases", testDeadBlocksPurge},
		{"ReleaseHeldFollowsTheTypes", testDeadBlocksTypes},
	})
}

// hold marks recs held behind a DEAD event as the relay does: an outage's
// failure (no attempt spent) of delay store.HoldFor.
func hold(t *testing.T, s store.Store, lease string, deadEventID string, recs ...store.Record) {
	t.Helper()
	fs := make([]store.Failure, len(recs))
	for i, r := range recs {
		fs[i] = store.Failure{ID: r.ID, Outage: true, Delay: store.HoldFor, Error: store.HoldReason(deadEventID)}
	}
	n, err := s.MarkFailed(ctxT(t), lease, fs)
	mustMark(t, n, err, int64(len(recs)), "hold")
}

// byEvent finds the record of event id in recs.
func byEvent(t *testing.T, recs []store.Record, id string) store.Record {
	t.Helper()
	for _, r := range recs {
		if r.EventID == id {
			return r
		}
	}
	t.Fatalf("event %s not among %v", id, eventIDs(recs))
	return store.Record{}
}

// deadAhead writes a1..an of aggregate agg, sends a1, makes a2 DEAD and
// holds the rest, as a relay with the aggregate's type blocking would.
func deadAhead(t *testing.T, h Harness, s store.Store, agg string, n int) []txbox.Event {
	t.Helper()
	ctx := ctxT(t)
	evs := make([]txbox.Event, n)
	for i := range evs {
		evs[i] = ev(agg, i+1)
	}
	write(t, h, s, evs...)
	got := claim(t, s, "L", 100, time.Minute)
	var mine []store.Record
	for _, r := range got {
		if r.AggregateID == agg {
			mine = append(mine, r)
		} else {
			must(s.Release(ctx, "L", []int64{r.ID}))
		}
	}
	if len(mine) != n {
		t.Fatalf("claimed %d of %s's %d rows", len(mine), agg, n)
	}
	n1, err := s.MarkSent(ctx, "L", []int64{mine[0].ID})
	mustMark(t, n1, err, 1, "sent")
	n2, err := s.MarkFailed(ctx, "L", []store.Failure{{ID: mine[1].ID, Dead: true, Error: "permanent: poison"}})
	mustMark(t, n2, err, 1, "dead")
	hold(t, s, "L", evs[1].ID, mine[2:]...)
	return evs
}

func testDeadBlocksReplay(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	db := as[store.DeadBlocker](t, s)
	other := ev("other", 1)
	write(t, h, s, other)
	a := deadAhead(t, h, s, "acct", 4) // a1 sent, a2 DEAD, a3 a4 held
	late := ev("acct", 5)
	write(t, h, s, late) // written after the hold: waits behind it too

	got := claim(t, s, "L2", 100, time.Minute)
	if len(got) != 1 || got[0].EventID != other.ID {
		t.Fatalf("with acct held, a claim must return only the other aggregate's row; got %d rows %v", len(got), eventIDs(got))
	}
	must(s.MarkSent(ctx, "L2", ids(got)))

	rows, err := s.List(ctx, store.Filter{AggregateID: "acct", Status: txbox.StatusRetry})
	if err != nil || len(rows) != 2 {
		t.Fatalf("held rows: %v %d", err, len(rows))
	}
	for _, r := range rows {
		if r.NextRetryAt == nil || r.NextRetryAt.Before(store.HeldAfter) || r.RetryCount != 0 || r.LastError != store.HoldReason(a[1].ID) {
			t.Fatalf("held row %s: next_retry_at %v, retry_count %d (a hold spends none), last_error %q", r.EventID, r.NextRetryAt, r.RetryCount, r.LastError)
		}
	}
	b, err := db.Blocked(ctx)
	if err != nil || b.Aggregates != 1 || b.Rows != 3 || b.OldestAge <= 0 || b.OldestAge > time.Minute {
		t.Fatalf("blocked %+v %v, want 1 aggregate, 3 rows (a3 a4 held, a5 behind them)", b, err)
	}

	// Ahead: a3 and a4 both have a2 (DEAD) ahead, a4 also a3 (held,
	// unsent): the DEAD one is reported. The other aggregate's next row
	// has nothing (its first was sent).
	held := byEvent(t, rows, a[2].ID)
	next := byEvent(t, rows, a[3].ID)
	ahead, err := db.Ahead(ctx, []store.AggregateRow{
		{AggregateType: "Order", AggregateID: "acct", ID: held.ID},
		{AggregateType: "Order", AggregateID: "acct", ID: next.ID},
		{AggregateType: "Order", AggregateID: "other", ID: next.ID},
		{AggregateType: "Nope", AggregateID: "acct", ID: next.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ahead) != 2 {
		t.Fatalf("ahead: %d entries %+v, want 2", len(ahead), ahead)
	}
	for _, x := range ahead {
		if x.AggregateType != "Order" || x.AggregateID != "acct" || x.EventID != a[1].ID || !x.Dead {
			t.Fatalf("ahead: %+v, want a2 (DEAD) of Order/acct", x)
		}
	}

	// Nothing to release while a2 is DEAD and blocks.
	if n, err := db.ReleaseHeld(ctx, true, nil); err != nil || n != 0 {
		t.Fatalf("release with a2 DEAD: %d %v", n, err)
	}
	if n, err := db.ReleaseHeld(ctx, false, []string{"Nope", "Order"}); err != nil || n != 0 {
		t.Fatalf("release with Order blocking: %d %v", n, err)
	}

	n, err := s.Replay(ctx, store.Filter{EventIDs: []string{a[1].ID}})
	mustMark(t, n, err, 1, "replay")
	if b, err := db.Blocked(ctx); err != nil || b.Rows != 0 || b.Aggregates != 0 {
		t.Fatalf("after the replay, blocked %+v %v", b, err)
	}
	// a2, a3, a4, a5 in order, by lowest ids: one claim takes all four
	// (a3 and a4 were released in the replay's transaction).
	got = claim(t, s, "L3", 100, time.Minute)
	want := []string{a[1].ID, a[2].ID, a[3].ID, late.ID}
	if len(got) != len(want) {
		t.Fatalf("after the replay: claimed %d rows %v, want a2..a5", len(got), eventIDs(got))
	}
	for i, r := range got {
		if r.EventID != want[i] {
			t.Fatalf("after the replay, row %d of the claim (by id) is %s, want %s: the replayed row must come first and the held ones after it in their order", i, r.EventID, want[i])
		}
	}
}

func testDeadBlocksPurge(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	db := as[store.DeadBlocker](t, s)
	a := deadAhead(t, h, s, "acct", 4)
	if got := claim(t, s, "L2", 100, time.Minute); len(got) != 0 {
		t.Fatalf("held rows claimed: %v", eventIDs(got))
	}
	n, err := s.Purge(ctx, store.Filter{EventIDs: []string{a[1].ID}})
	mustMark(t, n, err, 1, "purge")
	if b, err := db.Blocked(ctx); err != nil || b.Rows != 0 {
		t.Fatalf("after the purge, blocked %+v %v", b, err)
	}
	// With the DEAD row gone, a4 has a3 (released, unsent) ahead.
	rows, err := s.List(ctx, store.Filter{AggregateID: "acct", Status: txbox.StatusPending})
	if err != nil || len(rows) != 2 {
		t.Fatalf("released rows: %v %d, want a3 and a4 back to PENDING", err, len(rows))
	}
	ahead, err := db.Ahead(ctx, []store.AggregateRow{{AggregateType: "Order", AggregateID: "acct", ID: byEvent(t, rows, a[3].ID).ID}})
	if err != nil || len(ahead) != 1 || ahead[0].EventID != a[2].ID || ahead[0].Dead {
		t.Fatalf("ahead of a4 after the purge: %+v %v, want a3, not DEAD", ahead, err)
	}
	got := claim(t, s, "L3", 100, time.Minute)
	if len(got) != 2 || got[0].EventID != a[2].ID || got[1].EventID != a[3].ID {
		t.Fatalf("after the purge: claimed %v, want a3 then a4", eventIDs(got))
	}
}

func testDeadBlocksTypes(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	db := as[store.DeadBlocker](t, s)
	a := deadAhead(t, h, s, "acct", 3) // a3 held behind a2
	// A relay whose blocking types do not include Order (the operator
	// took it off --dead-blocks) releases a3; one with it keeps a3 held.
	if n, err := db.ReleaseHeld(ctx, false, []string{"Order"}); err != nil || n != 0 {
		t.Fatalf("release with Order blocking: %d %v", n, err)
	}
	if n, err := db.ReleaseHeld(ctx, false, []string{"Account"}); err != nil || n != 1 {
		t.Fatalf("release with only Account blocking: %d %v, want a3 released", n, err)
	}
	got := claim(t, s, "L2", 100, time.Minute)
	if len(got) != 1 || got[0].EventID != a[2].ID {
		t.Fatalf("released row: claimed %v, want a3", eventIDs(got))
	}
	if got[0].RetryCount != 0 {
		t.Fatalf("a released row spent %d attempts", got[0].RetryCount)
	}
}
