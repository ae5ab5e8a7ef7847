package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// runTxClaims runs the cases of claimapi.TxClaimer when the store has it: the
// same rules as lease claims (lowest ids, per-aggregate prefix, a failure
// blocks only its aggregate), with the open transaction as the lease.
func runTxClaims(t *testing.T, h Harness) {
	runCasesIf[claimapi.TxClaimer](t, h, "store has no transaction-held claims (claimapi.TxClaimer)", []testCase{
		{"HoldsRowsUntilEnded", testTxHolds},
		{"BlocksOnlyItsAggregate", testTxBlocksAggregate},
		{"FinishOutcome", testTxFinish},
		{"LeasesAndTransactionsRespectEachOther", testTxWithLeases},
		{"DeepBlockedAggregate", testTxDeepBlocked},
		{"Concurrent", testTxConcurrent},
	})
}

func claimTx(t *testing.T, s store.Store, limit int) claimapi.Claim {
	t.Helper()
	return held(t, "claim tx", s.(claimapi.TxClaimer).ClaimTx, limit)
}

// held is a claim of up to limit rows by claim (ClaimTx, ClaimTxChained),
// aborted when t ends unless finished before.
func held[C claimapi.Claim](t *testing.T, what string, claim func(context.Context, int) (C, error), limit int) C {
	t.Helper()
	c, err := claim(ctxT(t), limit)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(c.Abort)
	return c
}

func testTxHolds(t *testing.T, h Harness) {
	s := open(t, h)
	in := []txbox.Event{ev("a", 1), ev("b", 1), ev("a", 2)}
	in[0].Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	write(t, h, s, in...)
	c1 := claimTx(t, s, 10)
	got := c1.Records()
	if len(got) != 3 || got[0].EventID != in[0].ID || got[1].EventID != in[1].ID || got[2].EventID != in[2].ID {
		t.Fatalf("claim: want the 3 rows in id order, got %v", eventIDs(got))
	}
	if e, err := got[0].Event(); err != nil || e.Headers["traceparent"] != in[0].Headers["traceparent"] || string(e.Payload) != string(in[0].Payload) {
		t.Fatalf("round trip: %+v %v", e, err)
	}
	if c2 := claimTx(t, s, 10); len(c2.Records()) != 0 {
		t.Fatalf("rows held by an open claim were claimed again: %v", eventIDs(c2.Records()))
	}
	if got := claim(t, s, "L", 10, time.Minute); len(got) != 0 {
		t.Fatalf("a lease claim took rows held by an open claim: %v", eventIDs(got))
	}
	c1.Abort()
	c3 := claimTx(t, s, 10)
	if len(c3.Records()) != 3 {
		t.Fatalf("after Abort the rows must be claimable again, got %d", len(c3.Records()))
	}
	for _, r := range c3.Records() {
		if r.Status != txbox.StatusPending || r.RetryCount != 0 {
			t.Fatalf("an aborted claim changed row %d: %s/%d", r.ID, r.Status, r.RetryCount)
		}
	}
}

func testTxBlocksAggregate(t *testing.T, h Harness) {
	s := open(t, h)
	a1, a2, a3, b1 := ev("a", 1), ev("a", 2), ev("a", 3), ev("b", 1)
	write(t, h, s, a1, a2, a3, b1)
	c1 := claimTx(t, s, 1)
	if r := c1.Records(); len(r) != 1 || r[0].EventID != a1.ID {
		t.Fatalf("limit 1 must take a1, got %v", eventIDs(r))
	}
	c2 := claimTx(t, s, 10)
	if r := c2.Records(); len(r) != 1 || r[0].EventID != b1.ID {
		t.Fatalf("while a1 is held only b1 may be claimed, got %d rows", len(r))
	}
	if err := c1.Finish(ctxT(t), []int64{c1.Records()[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	c3 := claimTx(t, s, 10)
	if r := c3.Records(); len(r) != 2 || r[0].EventID != a2.ID || r[1].EventID != a3.ID {
		t.Fatalf("after a1 is sent a2, a3 follow (b1 still held), got %d rows", len(r))
	}
}

func testTxFinish(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2, b1, c1, d1 := ev("a", 1), ev("a", 2), ev("b", 1), ev("c", 1), ev("d", 1)
	write(t, h, s, a1, a2, b1, c1, d1)
	c := claimTx(t, s, 10)
	r := c.Records()
	if len(r) != 5 {
		t.Fatalf("claimed %d", len(r))
	}
	// a1 fails for an hour (a2 is handed back unnamed), b1 is sent, c1 is
	// dead, d1 is handed back.
	err := c.Finish(ctx, []int64{r[2].ID}, []store.Failure{
		{ID: r[0].ID, Error: "broker down", Delay: time.Hour},
		{ID: r[3].ID, Error: "bad subject", Dead: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, []int64{r[1].ID}, nil); err == nil {
		t.Fatal("Finish on an ended claim must fail")
	}
	mixedStats(t, s)
	sent, err := s.List(ctx, store.Filter{Status: txbox.StatusSent})
	if err != nil || len(sent) != 1 || sent[0].EventID != b1.ID || sent[0].SentAt == nil {
		t.Fatalf("list SENT: %v %v", eventIDs(sent), err)
	}
	failed, err := s.List(ctx, store.Filter{Status: txbox.StatusRetry})
	if err != nil || len(failed) != 1 || failed[0].RetryCount != 1 || failed[0].LastError != "broker down" || failed[0].NextRetryAt == nil {
		t.Fatalf("list RETRY: %+v %v", failed, err)
	}
	next := claimTx(t, s, 10)
	if r := next.Records(); len(r) != 1 || r[0].EventID != d1.ID {
		t.Fatalf("a2 waits behind a1's retry; only d1 may be claimed, got %v", eventIDs(r))
	}
}

func testTxWithLeases(t *testing.T, h Harness) {
	s := open(t, h)
	a1, a2, b1, b2 := ev("a", 1), ev("a", 2), ev("b", 1), ev("b", 2)
	write(t, h, s, a1, b1, a2, b2)
	leased := claim(t, s, "L", 1, time.Minute)
	if len(leased) != 1 || leased[0].EventID != a1.ID {
		t.Fatalf("lease claim: %v", eventIDs(leased))
	}
	c := claimTx(t, s, 1)
	if r := c.Records(); len(r) != 1 || r[0].EventID != b1.ID {
		t.Fatalf("transaction claim next to a lease: want b1, got %v", eventIDs(r))
	}
	if got := claim(t, s, "L2", 10, time.Minute); len(got) != 0 {
		t.Fatalf("a2 waits behind leased a1 and b2 behind held b1; got %v", eventIDs(got))
	}
}

func testTxDeepBlocked(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	checkDeepBlocked(t, h, s, func() {
		head := claimTx(t, s, 1)
		if err := head.Finish(ctx, nil, []store.Failure{{ID: head.Records()[0].ID, Error: "down", Delay: time.Hour}}); err != nil {
			t.Fatal(err)
		}
	}, func() []store.Record {
		c := claimTx(t, s, 5)
		defer c.Abort()
		return c.Records()
	})
}

// testTxConcurrent: claimers holding their claims for a while never get the
// same row, and no claimer gets a row of an aggregate before the claim
// holding the aggregate's previous row began to commit.
func testTxConcurrent(t *testing.T, h Harness) {
	s := open(t, h)
	in := grid("agg-", 30, 20)
	write(t, h, s, in...)
	ctx := ctxT(t)
	var (
		mu       sync.Mutex
		clock    int64
		seen     = map[string]int{}
		finished = map[int64]int64{} // row id -> clock when its commit began
		lastID   = map[string]int64{}
	)
	runClaimers(t, 4, 30, 3*time.Millisecond, func(int, int) (int, error) {
		c, err := s.(claimapi.TxClaimer).ClaimTx(ctx, 1+rand.IntN(40))
		if err != nil {
			return 0, err
		}
		recs := c.Records()
		if len(recs) == 0 {
			return 0, nil
		}
		mu.Lock()
		clock++
		var order error
		for _, r := range recs {
			seen[r.EventID]++
			if prev := lastID[r.AggregateID]; prev != 0 {
				if r.ID <= prev {
					order = fmt.Errorf("aggregate %s: id %d handed out after %d", r.AggregateID, r.ID, prev)
				} else if done, ok := finished[prev]; !ok && !slices.ContainsFunc(recs, func(r store.Record) bool { return r.ID == prev }) {
					order = fmt.Errorf("aggregate %s: id %d handed out while %d was still held", r.AggregateID, r.ID, prev)
				} else if ok && done > clock {
					order = fmt.Errorf("aggregate %s: clock went backwards", r.AggregateID)
				}
			}
			lastID[r.AggregateID] = r.ID
		}
		mu.Unlock()
		if order != nil {
			c.Abort()
			return 0, order
		}
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		mu.Lock()
		clock++
		for _, r := range recs {
			finished[r.ID] = clock
		}
		mu.Unlock()
		return len(recs), c.Finish(ctx, ids(recs), nil)
	})
	claimedOnce(t, seen, len(in))
}

// runChainClaims runs the cases of claimapi.ChainClaimer when the store has
// it: a chained claim takes the rows behind this store's own open claims,
// and only those; whatever else holds or blocks an earlier row (a lease, a
// RETRY, a row its claim failed) still stops the aggregate.
func runChainClaims(t *testing.T, h Harness) {
	runCasesIf[claimapi.ChainClaimer](t, h, "store does not chain claims (claimapi.ChainClaimer)", []testCase{
		{"TakesRowsBehindOwnClaims", testChainBehindOwn},
		{"StopsAtLeasesAndRetries", testChainStops},
		{"StopsAtRowItsClaimFailed", testChainStopsAtFailed},
	})
}

func claimChained(t *testing.T, s store.Store, limit int) claimapi.Claim {
	t.Helper()
	return held(t, "chained claim", s.(claimapi.ChainClaimer).ClaimTxChained, limit)
}

func testChainBehindOwn(t *testing.T, h Harness) {
	s := open(t, h)
	a1, a2, a3, a4, a5, b1, b2 := ev("a", 1), ev("a", 2), ev("a", 3), ev("a", 4), ev("a", 5), ev("b", 1), ev("b", 2)
	write(t, h, s, a1, a2, b1, a3, a4, b2, a5)
	first := claimTx(t, s, 2)
	if got := inOrder(first.Records()); !slices.Equal(got, idsOf(a1, a2)) {
		t.Fatalf("first claim: want a1 a2, got %v", got)
	}
	plain := claimTx(t, s, 10)
	if got := inOrder(plain.Records()); !slices.Equal(got, idsOf(b1, b2)) {
		t.Fatalf("an unchained claim behind held a1 a2 must take only b1 b2, got %v", got)
	}
	plain.Abort()
	two := claimChained(t, s, 3)
	if got := inOrder(two.Records()); !slices.Equal(got, idsOf(b1, a3, a4)) {
		t.Fatalf("chained claim, limit 3: want b1 a3 a4 (the lowest ids behind the held rows), got %v", got)
	}
	three := claimChained(t, s, 10)
	if got := inOrder(three.Records()); !slices.Equal(got, idsOf(b2, a5)) {
		t.Fatalf("second chained claim: want b2 a5, got %v", got)
	}
	if none := claimChained(t, s, 10); len(none.Records()) != 0 {
		t.Fatalf("every row is held, yet a chained claim took %v", inOrder(none.Records()))
	}
	// Behind a claim that ended, the rows it handed back come first again.
	two.Abort()
	again := claimChained(t, s, 10)
	if got := inOrder(again.Records()); !slices.Equal(got, idsOf(b1, a3, a4)) {
		t.Fatalf("after the middle claim's Abort: want b1 a3 a4 again, got %v", got)
	}
}

func testChainStops(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2, b1, b2, c1, c2 := ev("a", 1), ev("a", 2), ev("b", 1), ev("b", 2), ev("c", 1), ev("c", 2)
	write(t, h, s, a1, b1, c1, a2, b2, c2)
	// a1 is leased (another relay's lease claim), b1 fails for an hour.
	if got := claim(t, s, "L", 1, time.Minute); len(got) != 1 || got[0].EventID != a1.ID {
		t.Fatalf("lease claim: want a1, got %v", inOrder(got))
	}
	fb := claimTx(t, s, 1)
	if r := fb.Records(); len(r) != 1 || r[0].EventID != b1.ID {
		t.Fatalf("want b1, got %v", inOrder(r))
	}
	if err := fb.Finish(ctx, nil, []store.Failure{{ID: fb.Records()[0].ID, Error: "down", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	held := claimTx(t, s, 1)
	if r := held.Records(); len(r) != 1 || r[0].EventID != c1.ID {
		t.Fatalf("want c1, got %v", inOrder(r))
	}
	if got := inOrder(claimChained(t, s, 10).Records()); !slices.Equal(got, idsOf(c2)) {
		t.Fatalf("chained claim: only c2 (behind this store's held c1) may be taken; a2 waits for the lease, b2 for the retry; got %v", got)
	}
}

func testChainStopsAtFailed(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2, a3 := ev("a", 1), ev("a", 2), ev("a", 3)
	write(t, h, s, a1, a2, a3)
	first := claimTx(t, s, 2)
	r := first.Records()
	if got := inOrder(r); !slices.Equal(got, idsOf(a1, a2)) {
		t.Fatalf("want a1 a2, got %v", got)
	}
	// a1 sent, a2 to RETRY: a3 must wait for a2.
	if err := first.Finish(ctx, []int64{r[0].ID}, []store.Failure{{ID: r[1].ID, Error: "down", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if got := claimChained(t, s, 10).Records(); len(got) != 0 {
		t.Fatalf("a chained claim passed a2 waiting in RETRY: %v", inOrder(got))
	}
}

// inOrder is the event ids of recs, in their order.
func inOrder(recs []store.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.EventID
	}
	return out
}

func idsOf(evs ...txbox.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}
