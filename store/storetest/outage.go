package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// testOutageSpendsNoAttempt: a failure of the way out (store.Failure with
// Outage) puts the row back to RETRY after its delay, blocking its
// aggregate as any retry does, with retry_count as it was, through every
// way a store records failures: the lease-fenced MarkFailed and, where the
// store has them, a transaction claim's Finish. An ordinary failure in the
// same call still spends one: were every failure to spend an attempt, a
// broker outage longer than the retry schedule would send the backlog to
// DEAD.
func testOutageSpendsNoAttempt(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2, b1 := ev("a", 1), ev("a", 2), ev("b", 1)
	write(t, h, s, a1, a2, b1)
	const rounds = 3
	for round := range rounds {
		lease := fmt.Sprintf("L%d", round)
		got := claim(t, s, lease, 10, time.Minute)
		want := []string{a1.ID, a2.ID}
		if round == 0 {
			want = []string{a1.ID, a2.ID, b1.ID}
		}
		if !slices.Equal(inOrder(got), want) {
			t.Fatalf("round %d: claimed %v, want %v", round, inOrder(got), want)
		}
		// a1's way out fails (due again at once), a2 waits behind it; in
		// the first round b1 fails for a reason of its own (for an hour).
		fs := []store.Failure{{ID: got[0].ID, Error: "broker unavailable", Outage: true}}
		if round == 0 {
			fs = append(fs, store.Failure{ID: got[2].ID, Error: "refused by the broker", Delay: time.Hour})
		}
		n, err := s.MarkFailed(ctx, lease, fs)
		mustMark(t, n, err, int64(len(fs)), "mark failed")
		n, err = s.Release(ctx, lease, []int64{got[1].ID})
		mustMark(t, n, err, 1, "release")
	}
	if recs, err := s.List(ctx, store.Filter{EventIDs: []string{b1.ID}}); err != nil || len(recs) != 1 || recs[0].RetryCount != 1 {
		t.Fatalf("the ordinary failure must spend one attempt: %+v %v", recs, err)
	}
	recs, err := s.List(ctx, store.Filter{EventIDs: []string{a1.ID}})
	if err != nil || len(recs) != 1 {
		t.Fatalf("list a1: %v %v", recs, err)
	}
	if r := recs[0]; r.Status != txbox.StatusRetry || r.RetryCount != 0 || r.LastError != "broker unavailable" || r.NextRetryAt == nil {
		t.Fatalf("after %d outage failures a1 = status %s, retry_count %d, last_error %q: want RETRY, 0, the error", rounds, r.Status, r.RetryCount, r.LastError)
	}
	if _, ok := s.(claimapi.TxClaimer); !ok {
		return
	}
	c := claimTx(t, s, 10)
	r := c.Records()
	if !slices.Equal(inOrder(r), []string{a1.ID, a2.ID}) {
		t.Fatalf("transaction claim: want a1, a2 in order, got %v", inOrder(r))
	}
	if err := c.Finish(ctx, nil, []store.Failure{{ID: r[0].ID, Error: "no stream for the subject", Delay: time.Hour, Outage: true}}); err != nil {
		t.Fatal(err)
	}
	recs, err = s.List(ctx, store.Filter{EventIDs: []string{a1.ID}})
	if err != nil || len(recs) != 1 || recs[0].RetryCount != 0 || recs[0].Status != txbox.StatusRetry {
		t.Fatalf("after a transaction claim's outage failure a1 = %+v %v: want RETRY with retry_count 0", recs, err)
	}
	if got := claim(t, s, "after", 10, time.Minute); len(got) != 0 {
		t.Fatalf("a1 waits an hour and a2 behind it; claimed %v", eventIDs(got))
	}
}
