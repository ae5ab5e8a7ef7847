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
