// Package storetest is the conformance suite every store passes. A bug found
// in one dialect becomes a case here, so every dialect proves the fix.
package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
)

// Harness gives the suite one database.
type Harness interface {
	// Open returns a store on fresh, uniquely named tables (not yet
	// migrated) that are dropped when t ends.
	Open(t *testing.T) store.Store
	// Begin starts a transaction on s's database.
	Begin(t *testing.T, s store.Store) (tx store.Tx, commit, rollback func() error)
	// ForeignInsert inserts a row with plain SQL giving only the five columns
	// a producer in another language must give.
	ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string)
}

// Run runs every case against h.
func Run(t *testing.T, h Harness) {
	runCases(t, h, []testCase{
		{"CommitVisibility", testCommitVisibility},
		{"ClaimShape", testClaimShape},
		{"ClaimTakesLowestIDs", testClaimLowestIDs},
		{"AggregateKeyIsExact", testAggregateKeyExact},
		{"MultiRowInsert", testMultiRowInsert},
		{"ForeignProducer", testForeignProducer},
		{"LeaseBlocksAggregate", testLeaseBlocksAggregate},
		{"RetryBlocksOnlyItsAggregate", testRetryBlocksAggregate},
		{"OutageSpendsNoAttempt", testOutageSpendsNoAttempt},
		{"LeaseExpiryRescue", testLeaseExpiry},
		{"Fencing", testFencing},
		{"ClockJumpWhileLeased", testClockJumpWhileLeased},
		{"BackoffSchedule", testBackoff},
		{"DeadAndReplay", testDeadReplay},
		{"KeysetPagingCountAndErrorText", testKeysetCount},
		{"Release", testRelease},
		{"Stats", testStats},
		{"Backlog", testBacklog},
		{"Cleanup", testCleanup},
		{"CleanupLock", testCleanupLock},
		{"DeepBlockedAggregateDoesNotStarveOthers", testDeepBlocked},
		{"ConcurrentClaimers", testConcurrentClaimers},
		{"ConcurrentMigrate", testConcurrentMigrate},
		{"BadBytesInLastError", testBadBytesInLastError},
		{"TxClaims", runTxClaims},
		{"ChainClaims", runChainClaims},
		{"ReusedIDs", testReusedIDs},
		{"Count", testCount},
		{"RefusedMarkIsIsolated", testRefusedMark},
		{"DeadBlocks", runDeadBlocks},
	})
}

// testCase is one case of the suite, by the name it runs under.
type testCase struct {
	name string
	fn   func(*testing.T, Harness)
}

// runCases runs each case as a subtest on h.
func runCases(t *testing.T, h Harness, cases []testCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// runCasesIf runs cases when h's stores are a T, the optional interface
// they prove, and skips them, saying why, when not.
func runCasesIf[T any](t *testing.T, h Harness, skip string, cases []testCase) {
	if _, ok := h.Open(t).(T); !ok {
		t.Skip(skip)
	}
	runCases(t, h, cases)
}

// as returns v as a T, the interface a case needs, or fails t.
func as[T any](t *testing.T, v any) T {
	t.Helper()
	x, ok := v.(T)
	if !ok {
		t.Fatalf("%T does not implement %v", v, reflect.TypeFor[T]())
	}
	return x
}

// open returns a migrated store on fresh tables.
func open(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t)
	if err := s.Migrate(ctxT(t)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

func ctxT(t *testing.T) context.Context {
	// A bound for a case that hangs, generous for a loaded machine: a case
	// that passes returns long before it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// write commits events in one transaction through the public write API.
func write(t *testing.T, h Harness, s store.Store, events ...txbox.Event) {
	t.Helper()
	InTx(t, h, s, func(tx store.Tx) error {
		if err := outbox.NewWriter(s.Dialect()).Add(ctxT(t), tx, events...); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	})
}

func ev(agg string, n int) txbox.Event {
	return txbox.MustEvent("Order", agg, "OrderEvent", map[string]any{"agg": agg, "n": n})
}

func claim(t *testing.T, s store.Store, lease string, limit int, leaseFor time.Duration) []store.Record {
	t.Helper()
	recs, err := s.Claim(ctxT(t), store.ClaimRequest{Lease: lease, Limit: limit, LeaseFor: leaseFor})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return recs
}

func ids(recs []store.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func eventIDs(recs []store.Record) map[string]bool {
	m := map[string]bool{}
	for _, r := range recs {
		m[r.EventID] = true
	}
	return m
}

func mustMark(t *testing.T, n int64, err error, want int64, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if n != want {
		t.Fatalf("%s: changed %d rows, want %d", what, n, want)
	}
}

func testCommitVisibility(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	w := outbox.NewWriter(s.Dialect())

	tx, commit, _ := h.Begin(t, s)
	e1, e2 := ev("a", 1), ev("a", 2)
	if err := w.Add(ctx, tx, e1, e2); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "L1", 10, time.Minute); len(got) != 0 {
		t.Fatalf("uncommitted rows were claimable: %d", len(got))
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}

	tx, _, rollback := h.Begin(t, s)
	if err := w.Add(ctx, tx, ev("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}

	got := claim(t, s, "L1", 10, time.Minute)
	if len(got) != 2 || got[0].EventID != e1.ID || got[1].EventID != e2.ID {
		t.Fatalf("after commit want [e1 e2] in order, got %v", eventIDs(got))
	}
	if got := claim(t, s, "L2", 10, time.Minute); len(got) != 0 {
		t.Fatalf("rolled-back event claimable: %v", eventIDs(got))
	}
}

func testClaimShape(t *testing.T, h Harness) {
	s := open(t, h)
	in := []txbox.Event{ev("a", 1), ev("b", 1), ev("a", 2), ev("b", 2), ev("a", 3)}
	in[0].AggregateVersion = 7
	in[0].Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	write(t, h, s, in...)
	got := claim(t, s, "lease-1", 100, time.Minute)
	if len(got) != len(in) {
		t.Fatalf("claimed %d, want %d", len(got), len(in))
	}
	for i, r := range got {
		if r.EventID != in[i].ID {
			t.Fatalf("row %d: event %s, want %s (id order)", i, r.EventID, in[i].ID)
		}
		if i > 0 && r.ID <= got[i-1].ID {
			t.Fatalf("not sorted by id: %v", ids(got))
		}
		if r.Status != txbox.StatusProcessing || r.LockedBy != "lease-1" || r.LockedUntil == nil {
			t.Fatalf("row %d: status %s locked_by %q until %v", i, r.Status, r.LockedBy, r.LockedUntil)
		}
	}
	e, err := got[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	if e.AggregateVersion != 7 || e.Headers["traceparent"] != in[0].Headers["traceparent"] || e.Type != "OrderEvent" ||
		e.AggregateType != "Order" || e.AggregateID != "a" || string(e.Payload) != string(in[0].Payload) {
		t.Fatalf("round trip: got %+v want %+v", e, in[0])
	}
	if d := e.OccurredAt.Sub(in[0].OccurredAt); d > time.Millisecond || d < -time.Millisecond {
		t.Fatalf("occurred_at %v, want %v", e.OccurredAt, in[0].OccurredAt)
	}
	if got := claim(t, s, "lease-2", 100, time.Minute); len(got) != 0 {
		t.Fatalf("leased rows claimed again: %v", ids(got))
	}
}

// testClaimLowestIDs: with more deliverable rows than Limit, a claim takes
// the Limit lowest ids of the heads and their runs, and what it leaves of a
// run stays behind the leased head.
func testClaimLowestIDs(t *testing.T, h Harness) {
	s := open(t, h)
	a1, b1, a2, b2, a3, c1 := ev("a", 1), ev("b", 1), ev("a", 2), ev("b", 2), ev("a", 3), ev("c", 1)
	write(t, h, s, a1, b1, a2, b2, a3, c1)
	first := claim(t, s, "L1", 3, time.Minute)
	if got := eventIDs(first); len(first) != 3 || !got[a1.ID] || !got[b1.ID] || !got[a2.ID] {
		t.Fatalf("Limit 3 must take a1, b1, a2 (the lowest ids); got %d rows", len(first))
	}
	second := claim(t, s, "L2", 10, time.Minute)
	if len(second) != 1 || second[0].EventID != c1.ID {
		t.Fatalf("b2 and a3 wait behind leased rows of their aggregates; only c1 may be claimed, got %d rows", len(second))
	}
	n, err := s.MarkSent(ctxT(t), "L1", ids(first))
	mustMark(t, n, err, 3, "mark first")
	third := claim(t, s, "L3", 10, time.Minute)
	if len(third) != 2 || third[0].EventID != b2.ID || third[1].EventID != a3.ID {
		t.Fatalf("after the first claim is sent, b2 and a3 follow in id order; got %d rows", len(third))
	}
}

// testAggregateKeyExact: aggregate ids compare byte for byte ("a" and "A"
// are different aggregates; a case-insensitive collation would merge them),
// and so do aggregate types.
func testAggregateKeyExact(t *testing.T, h Harness) {
	s := open(t, h)
	lower1, upper1, lower2 := ev("a", 1), ev("A", 1), ev("a", 2)
	other := txbox.MustEvent("order", "a", "OrderEvent", map[string]any{"n": 1})
	write(t, h, s, lower1, upper1, lower2, other)
	first := claim(t, s, "L1", 1, time.Minute)
	if len(first) != 1 || first[0].EventID != lower1.ID {
		t.Fatalf("first claim: %v", eventIDs(first))
	}
	second := claim(t, s, "L2", 10, time.Minute)
	if got := eventIDs(second); len(second) != 2 || !got[upper1.ID] || !got[other.ID] {
		t.Fatalf("aggregates Order/A and order/a are not Order/a: want them while Order/a is leased, got %d rows", len(second))
	}
}

func testMultiRowInsert(t *testing.T, h Harness) {
	s := open(t, h)
	in := grid("agg-", 2500, 1)
	write(t, h, s, in...)
	seen := map[string]bool{}
	for range 10 {
		got := claim(t, s, "L", 1000, time.Minute)
		if len(got) == 0 {
			break
		}
		for _, r := range got {
			seen[r.EventID] = true
		}
		n, err := s.MarkSent(ctxT(t), "L", ids(got))
		mustMark(t, n, err, int64(len(got)), "mark sent")
	}
	if len(seen) != len(in) {
		t.Fatalf("saw %d of %d events", len(seen), len(in))
	}
}

func testForeignProducer(t *testing.T, h Harness) {
	s := open(t, h)
	id := txbox.NewID()
	h.ForeignInsert(t, s, id, "Invoice", "inv-1", "InvoiceIssued", `{"amount": 12.5}`)
	got := claim(t, s, "L", 10, time.Minute)
	if len(got) != 1 {
		t.Fatalf("claimed %d, want the foreign row", len(got))
	}
	r := got[0]
	if r.EventID != id || r.RetryCount != 0 || r.CreatedAt.IsZero() {
		t.Fatalf("foreign row defaults: %+v", r)
	}
	e, err := r.Event()
	if err != nil {
		t.Fatalf("decode foreign row: %v", err)
	}
	if e.AggregateType != "Invoice" || e.AggregateID != "inv-1" || e.Type != "InvoiceIssued" || e.OccurredAt.IsZero() || e.AggregateVersion != 0 {
		t.Fatalf("foreign event: %+v", e)
	}
}

func testLeaseBlocksAggregate(t *testing.T, h Harness) {
	s := open(t, h)
	a1, b1, a2, b2 := ev("a", 1), ev("b", 1), ev("a", 2), ev("b", 2)
	write(t, h, s, a1, b1, a2, b2)
	first := claim(t, s, "L1", 1, time.Minute) // takes a1 only
	if len(first) != 1 || first[0].EventID != a1.ID {
		t.Fatalf("first claim: %v", eventIDs(first))
	}
	second := claim(t, s, "L2", 10, time.Minute)
	if got := eventIDs(second); len(got) != 2 || !got[b1.ID] || !got[b2.ID] {
		t.Fatalf("second claimer must get b1, b2 and nothing of aggregate a while a1 is leased; got %d rows", len(second))
	}
	n, err := s.MarkSent(ctxT(t), "L1", ids(first))
	mustMark(t, n, err, 1, "mark a1")
	third := claim(t, s, "L3", 10, time.Minute)
	if len(third) != 1 || third[0].EventID != a2.ID {
		t.Fatalf("after a1 sent, a2 must be claimable; got %v", eventIDs(third))
	}
}

func testRetryBlocksAggregate(t *testing.T, h Harness) {
	s := open(t, h)
	a1, a2, b1 := ev("a", 1), ev("a", 2), ev("b", 1)
	write(t, h, s, a1, a2, b1)
	got := claim(t, s, "L1", 10, time.Minute)
	if len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	ctx := ctxT(t)
	// a1 fails: it waits an hour; a2 (claimed in the same batch) is released.
	n, err := s.MarkFailed(ctx, "L1", []store.Failure{{ID: got[0].ID, Error: "boom", Delay: time.Hour}})
	mustMark(t, n, err, 1, "mark failed")
	n, err = s.Release(ctx, "L1", []int64{got[1].ID})
	mustMark(t, n, err, 1, "release")
	n, err = s.MarkSent(ctx, "L1", []int64{got[2].ID})
	mustMark(t, n, err, 1, "mark b1")

	write(t, h, s, ev("b", 2))
	again := claim(t, s, "L2", 10, time.Minute)
	for _, r := range again {
		if r.AggregateID == "a" {
			t.Fatalf("aggregate a must stay blocked behind its RETRY row, got %s", r.EventID)
		}
	}
	if len(again) != 1 {
		t.Fatalf("aggregate b must flow: got %d rows", len(again))
	}
}

func testLeaseExpiry(t *testing.T, h Harness) {
	s := open(t, h)
	a1, a2 := ev("a", 1), ev("a", 2)
	write(t, h, s, a1, a2)
	const lease = 2 * time.Second
	start := time.Now()
	first := claim(t, s, "dead-relay", 10, lease)
	if len(first) != 2 {
		t.Fatalf("claimed %d", len(first))
	}
	// The lease runs from the first claim's statement, which began after
	// start: a second claim that returned within lease of start ran while
	// it held. One that returned later proves nothing either way (a loaded
	// machine), so only the first case can fail.
	if got := claim(t, s, "rescuer", 10, time.Minute); len(got) != 0 && time.Since(start) < lease {
		t.Fatalf("rows taken while the lease holds: %v", eventIDs(got))
	} else if len(got) != 0 {
		t.Logf("the second claim came %v after the first, past its %v lease: on this loaded machine the case shows nothing", time.Since(start), lease)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	var got []store.Record
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		if got = claim(t, s, "rescuer", 10, time.Minute); len(got) > 0 {
			break
		}
	}
	if len(got) != 2 || got[0].EventID != a1.ID || got[1].EventID != a2.ID {
		t.Fatalf("rescuer must take over both rows in order after expiry; got %d", len(got))
	}
	if got[0].LockedBy != "rescuer" {
		t.Fatalf("locked_by %q", got[0].LockedBy)
	}
}

func testFencing(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	write(t, h, s, ev("a", 1), ev("b", 1), ev("c", 1))
	old := claim(t, s, "old", 10, 200*time.Millisecond)
	if len(old) != 3 {
		t.Fatalf("claimed %d", len(old))
	}
	time.Sleep(400 * time.Millisecond)
	cur := claim(t, s, "new", 10, time.Minute)
	if len(cur) != 3 {
		t.Fatalf("takeover claimed %d", len(cur))
	}
	n, err := s.MarkSent(ctx, "old", ids(old))
	mustMark(t, n, err, 0, "stale MarkSent")
	n, err = s.MarkFailed(ctx, "old", []store.Failure{{ID: old[1].ID, Error: "x", Dead: true}})
	mustMark(t, n, err, 0, "stale MarkFailed")
	n, err = s.Release(ctx, "old", ids(old))
	mustMark(t, n, err, 0, "stale Release")
	recs, err := s.List(ctx, store.Filter{Status: txbox.StatusProcessing})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.LockedBy != "new" {
			t.Fatalf("row %d locked_by %q after stale marks", r.ID, r.LockedBy)
		}
	}
	n, err = s.MarkSent(ctx, "new", ids(cur))
	mustMark(t, n, err, 3, "holder MarkSent")
}

func testBackoff(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	write(t, h, s, ev("a", 1), ev("b", 1))
	got := claim(t, s, "L", 10, time.Minute)
	before := time.Now()
	n, err := s.MarkFailed(ctx, "L", []store.Failure{
		{ID: got[0].ID, Error: "now", Delay: 0},
		{ID: got[1].ID, Error: "later", Delay: time.Hour},
	})
	mustMark(t, n, err, 2, "mark failed")
	recs, err := s.List(ctx, store.Filter{Status: txbox.StatusRetry})
	if err != nil || len(recs) != 2 {
		t.Fatalf("list retry: %v %d", err, len(recs))
	}
	for _, r := range recs {
		if r.RetryCount != 1 || r.NextRetryAt == nil || r.LockedBy != "" {
			t.Fatalf("retry row: %+v", r)
		}
		if r.ID == got[1].ID {
			if d := r.NextRetryAt.Sub(before); d < 59*time.Minute || d > 61*time.Minute {
				t.Fatalf("next_retry_at %v, want ~1h from now", d)
			}
			if r.LastError != "later" {
				t.Fatalf("last_error %q", r.LastError)
			}
		}
	}
	again := claim(t, s, "L2", 10, time.Minute)
	if len(again) != 1 || again[0].ID != got[0].ID || again[0].RetryCount != 1 {
		t.Fatalf("only the due retry may be claimed; got %v", ids(again))
	}
}

func testRelease(t *testing.T, h Harness) {
	s := open(t, h)
	write(t, h, s, ev("a", 1), ev("a", 2))
	got := claim(t, s, "L", 10, time.Hour)
	n, err := s.Release(ctxT(t), "L", ids(got))
	mustMark(t, n, err, 2, "release")
	again := claim(t, s, "L2", 10, time.Hour)
	if len(again) != 2 || again[0].ID != got[0].ID {
		t.Fatalf("released rows must be claimable at once, in order; got %v", ids(again))
	}
}

func must(n int64, err error) int64 {
	if err != nil {
		panic(err)
	}
	return n
}

// grid returns perAgg events for each of aggs aggregates named prefix0,
// prefix1, ..., interleaved: the first event of every aggregate, then the
// second, and so on.
func grid(prefix string, aggs, perAgg int) []txbox.Event {
	var in []txbox.Event
	for n := range perAgg {
		for a := range aggs {
			in = append(in, ev(fmt.Sprintf("%s%d", prefix, a), n))
		}
	}
	return in
}

// testDeepBlocked: an aggregate whose first row waits in RETRY, with a long
// backlog behind it at the front of the table, must not hide the other
// aggregates' rows from small claims (a store that scans a bounded window of
// the oldest rows has to look further).
func testDeepBlocked(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	checkDeepBlocked(t, h, s, func() {
		head := claim(t, s, "L", 1, time.Minute)
		mustMark(t, must(s.MarkFailed(ctx, "L", []store.Failure{{ID: head[0].ID, Error: "down", Delay: time.Hour}})), nil, 1, "retry")
	}, func() []store.Record {
		got := claim(t, s, "L2", 5, time.Minute)
		n, err := s.Release(ctx, "L2", ids(got))
		mustMark(t, n, err, int64(len(got)), "release")
		return got
	})
}

// checkDeepBlocked writes 120 rows of one aggregate, fails its head with
// failHead (for an hour), writes a row of another aggregate, and checks
// that each of three small claims (claimFive, which gives its rows back)
// takes that row and only it.
func checkDeepBlocked(t *testing.T, h Harness, s store.Store, failHead func(), claimFive func() []store.Record) {
	t.Helper()
	var in []txbox.Event
	for i := range 120 {
		in = append(in, ev("hot", i))
	}
	write(t, h, s, in...)
	failHead()
	other := ev("cold", 0)
	write(t, h, s, other)
	for range 3 {
		if got := claimFive(); len(got) != 1 || got[0].EventID != other.ID {
			t.Fatalf("claim behind a blocked 120-row aggregate returned %d rows, want the other aggregate's row", len(got))
		}
	}
}

// testConcurrentClaimers: several claimers on one table never receive the
// same row, and each aggregate's rows are handed out in id order.
func testConcurrentClaimers(t *testing.T, h Harness) {
	s := open(t, h)
	in := grid("agg-", 40, 25)
	write(t, h, s, in...)
	ctx := ctxT(t)
	var mu sync.Mutex
	seen := map[string]int{}
	lastByAgg := map[string]int64{}
	runClaimers(t, 4, 20, 5*time.Millisecond, func(w, i int) (int, error) {
		lease := fmt.Sprintf("w%d-%d", w, i)
		recs, err := s.Claim(ctx, store.ClaimRequest{Lease: lease, Limit: 1 + rand.IntN(60), LeaseFor: time.Minute})
		if err != nil || len(recs) == 0 {
			return 0, err
		}
		mu.Lock()
		var order error
		for _, r := range recs {
			seen[r.EventID]++
			if r.ID <= lastByAgg[r.AggregateID] && order == nil {
				order = fmt.Errorf("aggregate %s: id %d handed out after %d", r.AggregateID, r.ID, lastByAgg[r.AggregateID])
			}
			lastByAgg[r.AggregateID] = r.ID
		}
		mu.Unlock()
		if order != nil {
			return 0, order
		}
		if n, err := s.MarkSent(ctx, lease, ids(recs)); err != nil || n != int64(len(recs)) {
			return 0, fmt.Errorf("mark sent %d/%d: %v", n, len(recs), err)
		}
		return len(recs), nil
	})
	claimedOnce(t, seen, len(in))
}

func testConcurrentMigrate(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.Migrate(ctx) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	write(t, h, s, ev("a", 1))
}

// URL is testenv.URL, re-exported so store test packages outside this module
// tree can find services the same way.
func URL(t testing.TB, env string) string { return testenv.URL(t, env) }
