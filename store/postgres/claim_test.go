package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// A hand-written RETRY row without next_retry_at is not deliverable, and it
// must end its aggregate's run: the row behind it may not be claimed.
func TestClaimStopsAtNullRetryTime(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	tb := s.Tables().Outbox
	for i, status := range []string{"PENDING", "RETRY", "PENDING"} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO `+tb+` (event_id, aggregate_type, aggregate_id, event_type, payload, status)
			VALUES ($1, 'Order', 'o-1', 'E', '{}', $2)`, txbox.NewID(), status); err != nil {
			t.Fatal(i, err)
		}
	}
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("claimed %d rows past a RETRY row with no next_retry_at", len(recs))
	}
}

func TestLongTableNameRefused(t *testing.T) {
	_, err := postgres.New(nil, postgres.Options{Tables: store.Tables{Outbox: "outbox_event_with_a_very_long_name_for_this_service"}})
	if err == nil {
		t.Fatal("a name PostgreSQL would truncate into collisions was accepted")
	}
}
