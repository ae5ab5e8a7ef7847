package sqlite

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/txbox/txbox"

	"github.com/txbox/txbox/store"
)

// TestQueryPlans pins what keeps the relay fast as history grows:
// the claim, its probe, the marks and cleanup never scan the outbox table;
// they use the partial indexes on unsent / sent rows or the primary key.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), Options{Tables: store.Tables{Outbox: "ob"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fullScan := regexp.MustCompile(`^SCAN (ob|o|e|x|t)$`)
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"probe", s.q.probe, []any{1}},
		{"claim", s.q.claim, []any{10, 10, "L", 1, 1}},
		{"markSent", s.q.markSent, []any{"[1]", "L", 1}},
		{"markFailed", s.q.markFailed, []any{`[{"id":1,"dead":0,"delay":1,"err":""}]`, "L", 1}},
		{"release", s.q.release, []any{"[1]", "L", 1}},
		{"oldest", `SELECT min(created_at) FROM ob WHERE ` + unsentTerm, nil},
		{"cleanup", `DELETE FROM ob WHERE id IN (SELECT id FROM ob WHERE status = 'SENT' AND sent_at < ? LIMIT ?)`, []any{1, 1}},
	} {
		rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			if fullScan.MatchString(detail) {
				t.Errorf("%s scans the outbox: %s", q.name, detail)
			}
		}
		rows.Close()
	}
}

// A hand-written RETRY row without next_retry_at is never deliverable, and
// it must stop its aggregate: the row behind it may not be claimed.
func TestNullTimesBlockTheRun(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "null.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"PENDING", "RETRY", "PENDING"} {
		if _, err := s.db.Exec("INSERT INTO "+s.q.table+" (event_id, aggregate_type, aggregate_id, event_type, payload, status) VALUES (?, 'A', 'a', 'E', '{}', ?)", st+txbox.NewID(), st); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(recs) != 1 || recs[0].Status != txbox.StatusProcessing {
		t.Fatalf("want only the first row: %v %+v", err, recs)
	}
}
