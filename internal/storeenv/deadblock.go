package storeenv

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Block makes s's aggregate of poison blocked, as a relay with its type in
// --dead-blocks leaves it: poison DEAD and held, the events after it held
// behind it. The events must be written already, and be every deliverable
// row of s.
func Block(t testing.TB, s store.Store, poison txbox.Event, held ...txbox.Event) {
	t.Helper()
	ctx := context.Background()
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "storeenv-block", Limit: 1 + len(held), LeaseFor: time.Minute})
	if err != nil || len(recs) != 1+len(held) {
		t.Fatalf("storeenv: block: claim: %v, %d rows, want %d", err, len(recs), 1+len(held))
	}
	fs := make([]store.Failure, len(recs))
	for i, r := range recs {
		if r.EventID == poison.ID {
			fs[i] = store.Failure{ID: r.ID, Dead: true, Error: "permanent: poison"}
		} else {
			fs[i] = store.Failure{ID: r.ID, Outage: true, Delay: store.HoldFor, Error: store.HoldReason(poison.ID)}
		}
	}
	if n, err := s.MarkFailed(ctx, "storeenv-block", fs); err != nil || n != int64(len(fs)) {
		t.Fatalf("storeenv: block: mark: %d %v", n, err)
	}
}
