package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox/store/postgres"
)

// TRUNCATE ... RESTART IDENTITY sets the sequence back below the claim
// floor: the rows written next must be claimed at once, not only after the
// next look below the floor (an hour here, a minute by default).
func TestFloorFollowsRestartIdentity(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	raiseFloor(t, s)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `TRUNCATE `+s.Tables().Outbox+` RESTART IDENTITY`); err != nil {
		t.Fatal(err)
	}
	writeRows(t, s, "b", 5)
	got := 0
	for end := time.Now().Add(3 * time.Second); got < 5 && time.Now().Before(end); {
		got += len(drainOnce(t, s, 100))
		time.Sleep(10 * time.Millisecond)
	}
	if got != 5 {
		t.Fatalf("claimed %d of the 5 rows written after RESTART IDENTITY (floor %d)", got, postgres.Floor(s))
	}
}

// TRUNCATE ... RESTART IDENTITY that keeps the undelivered rows (copied
// out, put back with new ids from 1) can leave more of them than the claim
// floor: the sequence then ends above the floor, so it does not look set
// back, and a claim reading from the floor saw only the kept rows above it:
// an aggregate's later rows were claimed before its earlier ones. The first
// claim after it must start at the aggregate's first row.
func TestFloorFollowsRestartIdentityKeepingBacklog(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	raiseFloor(t, s)
	drainAll(t, s)
	floor := postgres.Floor(s)
	writeRows(t, s, "k", int(floor)+50)
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	o := s.Tables().Outbox
	for _, q := range []string{
		`CREATE TEMP TABLE keep ON COMMIT DROP AS SELECT * FROM ` + o + ` WHERE status <> 'SENT'`,
		`TRUNCATE ` + o + ` RESTART IDENTITY`,
		`INSERT INTO ` + o + ` (event_id, aggregate_type, aggregate_id, event_type, payload)
			SELECT event_id, aggregate_type, aggregate_id, event_type, payload FROM keep ORDER BY id`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	recs := drainOnce(t, s, 10)
	if len(recs) == 0 || recs[0].ID != 1 {
		ids := make([]int64, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		t.Fatalf("the first claim after keeping %d rows through RESTART IDENTITY (floor %d) took ids %v, want aggregate k from id 1",
			floor+50, floor, ids)
	}
}
