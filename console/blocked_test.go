package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/store"
)

// The overview shows the aggregates held behind DEAD events (relay
// --dead-blocks): a card on the page, "blocked" in /api/overview.
func TestOverviewShowsBlockedAggregates(t *testing.T) {
	eachStore(t, func(t *testing.T, h harness, s store.Store) {
		c := newConsole(t, s, console.Options{})
		ctx := context.Background()
		poison, next := ev("acct", 1), ev("acct", 2)
		write(t, h, s, poison, next)
		recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "r#1", Limit: 2, LeaseFor: time.Minute})
		if err != nil || len(recs) != 2 {
			t.Fatalf("claim: %v %d", err, len(recs))
		}
		// As a relay with --dead-blocks Order marks them: the first DEAD,
		// the second held behind it.
		fs := []store.Failure{{ID: recs[0].ID, Dead: true, Error: "permanent: poison"},
			{ID: recs[1].ID, Outage: true, Delay: store.HoldFor, Error: store.HoldReason(poison.ID)}}
		if n, err := s.MarkFailed(ctx, "r#1", fs); err != nil || n != 2 {
			t.Fatalf("mark: %d %v", n, err)
		}
		var ov struct {
			Blocked *struct {
				Aggregates int64 `json:"aggregates"`
				Rows       int64 `json:"rows"`
			} `json:"blocked"`
		}
		getJSON(t, c, "/api/overview", &ov)
		must(t, ov.Blocked != nil && ov.Blocked.Aggregates == 1 && ov.Blocked.Rows == 1, "overview's blocked: %+v", ov.Blocked)
		page := get(t, c, "/")
		must(t, strings.Contains(page, `id="blocked">1</span>`), "overview page lacks the blocked card:\n%s", page)
	})
}
