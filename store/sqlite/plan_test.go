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

// openMigrated opens a store on a fresh database file and migrates it.
func openMigrated(t *testing.T, opts Options) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "test.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// planStatement is a statement whose query plan a test pins.
type planStatement struct {
	name string
	sql  string
	args []any
}

// checkPlans fails for each statement whose plan has a step that full
// matches: a scan of the whole table instead of an index.
func checkPlans(t *testing.T, s *Store, full *regexp.Regexp, stmts []planStatement) {
	t.Helper()
	for _, q := range stmts {
		rows, err := s.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			if full.MatchString(detail) {
				t.Errorf("%s scans the table: %s", q.name, detail)
			}
		}
		rows.Close()
	}
}

// TestQueryPlans pins what keeps the relay fast as history grows:
// the claim, its probe, the marks, the backlog sample and cleanup never
// scan the outbox table; they use the partial indexes on unsent / sent
// rows or the primary key. SQLite keeps delivered rows as SENT in the
// table, so a scan would read the whole history.
func TestQueryPlans(t *testing.T) {
	s := openMigrated(t, Options{Tables: store.Tables{Outbox: "ob"}})
	checkPlans(t, s, regexp.MustCompile(`^SCAN (ob|o|e|x|t)$`), []planStatement{
		{"probe", s.q.probe, []any{1}},
		{"claim", s.q.claim, []any{10, 10, "L", 1, 1}},
		{"markSent", s.q.markSent, []any{"[1]", "L", 1}},
		{"markFailed", s.q.markFailed, []any{`[{"id":1,"dead":0,"delay":1,"err":""}]`, "L", 1}},
		{"release", s.q.release, []any{"[1]", "L", 1}},
		{"oldest", s.q.statsOldest, nil},
		{"backlog", s.q.backlog, nil},
		{"cleanup", s.q.cleanup, []any{1, 1}},
	})
}

// A hand-written RETRY row without next_retry_at is never deliverable, and
// it must stop its aggregate: the row behind it may not be claimed.
func TestNullTimesBlockTheRun(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, Options{})
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
