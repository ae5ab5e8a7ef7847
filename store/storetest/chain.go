package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

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
