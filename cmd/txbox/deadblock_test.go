package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// `txbox stats` shows the aggregates held behind DEAD events (relay
// --dead-blocks), and `txbox dead replay` of the DEAD event releases them:
// it goes first, then the held one.
func TestStatsAndReplayOfBlockedAggregate(t *testing.T) {
	ctx := context.Background()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	tb := s.Tables()
	poison, next := txbox.MustEvent("Account", "a-1", "Posted", nil), txbox.MustEvent("Account", "a-1", "Posted", nil)
	storeenv.Write(t, storeenv.Postgres{}, s, poison, next)
	storeenv.Block(t, s, poison, next)
	flags := []string{"--db", testenv.URL(t, "TXBOX_TEST_POSTGRES"), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox}
	out, code := run(t, nil, append([]string{"stats"}, flags...)...)
	if code != 0 || !strings.Contains(out, "blocked      1 aggregates, 1 rows held behind DEAD events") {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, append([]string{"stats", "--json"}, flags...)...)
	if code != 0 || !strings.Contains(out, `"aggregates": 1`) {
		t.Fatalf("stats --json: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, append([]string{"dead", "replay", "--event-id", poison.ID, "--yes"}, flags...)...)
	if code != 0 {
		t.Fatalf("dead replay: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, append([]string{"stats"}, flags...)...)
	if code != 0 || !strings.Contains(out, "blocked      0\n") {
		t.Fatalf("stats after the replay: exit %d\n%s", code, out)
	}
	got, err := s.Claim(ctx, store.ClaimRequest{Lease: "r#2", Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 2 || got[0].EventID != poison.ID || got[1].EventID != next.ID {
		t.Fatalf("after the replay: %v, want the replayed event, then the held one", err)
	}
}
