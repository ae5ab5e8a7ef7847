package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store/postgres"
)

// TestBacklogPlanIgnoresHistory: the backlog sample the relay's gauges poll
// reads unsent and DEAD rows through their partial indexes, so 30,000
// delivered rows kept in the table (SENT in place) are never scanned.
func TestBacklogPlanIgnoresHistory(t *testing.T) {
	ctx := context.Background()
	s := storeenv.OpenPostgres(t, postgres.Options{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := s.Tables().Qualified(s.Tables().Outbox)
	seed := `INSERT INTO ` + tbl + ` (event_id, aggregate_type, aggregate_id, event_type, payload, status, sent_at)
		SELECT 'e' || g, 'A', 'a' || (g % 100), 'E', '{}', $1::text, CASE WHEN $1::text = 'SENT' THEN now() END
		FROM generate_series($2::int, $3::int) g`
	for _, r := range []struct {
		status   string
		from, to int
	}{{"SENT", 1, 30000}, {"PENDING", 30001, 30020}, {"DEAD", 30021, 30022}} {
		if _, err := s.Pool().Exec(ctx, seed, r.status, r.from, r.to); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE "+tbl); err != nil {
		t.Fatal(err)
	}
	var plan []string
	rows, err := s.Pool().Query(ctx, "EXPLAIN "+postgres.BacklogSQL(s))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "_unsent_idx") || !strings.Contains(text, "_dead_idx") {
		t.Fatalf("backlog query does not stay on the partial indexes:\n%s", text)
	}
	b, err := s.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Pending != 20 || b.Dead != 2 || b.Retry != 0 || b.Processing != 0 {
		t.Fatalf("backlog %+v, want 20 pending, 2 dead", b)
	}
}
