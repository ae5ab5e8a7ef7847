package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/txbox/txbox/store"
)

// TestBacklogPlan: SQLite keeps delivered rows as SENT in the table, so the
// backlog sample must answer from the partial indexes, never a table scan.
func TestBacklogPlan(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), Options{Tables: store.Tables{Outbox: "ob"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+fmt.Sprintf(backlogQuery, s.q.table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	fullScan := regexp.MustCompile(`^SCAN ob$`)
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		if fullScan.MatchString(detail) {
			t.Errorf("backlog scans the outbox: %s", detail)
		}
	}
}
