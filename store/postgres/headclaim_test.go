package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store/postgres"
)

// A deep aggregate whose front is held by a claim in flight fills the next
// claim's window; the fallback must find the other aggregates' heads behind
// it without reading the deep aggregate row by row (it took 23.6 s over
// 19,500 rows of one aggregate when it did), and take nothing of the held
// aggregate.
func TestHeadClaimBehindDeepHeldAggregate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others int // aggregates of one row each behind the deep one
		// median is what the median claim may take: the loose index scan
		// costs a few index descents (~6 ms here), the row-by-row fallback
		// it replaced 0.5-1 s over this backlog. Many aggregates are still
		// read row by row, only without the quadratic anti-join (its cost
		// grows with deep rows x other aggregates). That median took
		// 0.7-0.9 s on a 2-core machine running the suite beside two CPU
		// hogs, 3.4 s with three store suites beside that: hence 10 s.
		median time.Duration
		deep   int // rows of the deep aggregate
	}{
		{"few aggregates", 10, 200 * time.Millisecond, 40000}, // the loose index scan finds every head
		{"many aggregates", 5000, 10 * time.Second, 20000},    // more than it visits (headBound): rows in id order
	} {
		// Alone: the store is the only member of its table's split, so its
		// claims take the variant without the busy check, and
		// learn whether the window was full from the claim itself.
		for _, alone := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/alone=%v", tc.name, alone), func(t *testing.T) {
				s := migratedStore(t, postgres.Options{})
				ctx := context.Background()
				if alone {
					leave, err := s.Split(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer leave()
				}
				if postgres.ClaimAlone(s) != alone {
					t.Fatalf("claims alone: %v, want %v", postgres.ClaimAlone(s), alone)
				}
				fallbacks := postgres.Fallbacks(s)
				writeRows(t, s, "deep", tc.deep)
				if _, err := s.Pool().Exec(ctx, `INSERT INTO `+s.Tables().Outbox+`
				(event_id, aggregate_type, aggregate_id, event_type, payload)
				SELECT gen_random_uuid()::text, 'T', 'o' || g, 'E', '{}' FROM generate_series(1, $1) g`, tc.others); err != nil {
					t.Fatal(err)
				}
				ref := scanTime(t, s)
				first, err := s.ClaimTx(ctx, 500)
				if err != nil {
					t.Fatal(err)
				}
				defer first.Abort()
				if n := len(first.Records()); n != 500 || first.Records()[0].AggregateID != "deep" {
					t.Fatalf("first claim took %d rows, want 500 of the deep aggregate", n)
				}
				// Several claims, so that a prepared statement's generic plan is
				// in use too (PostgreSQL switches after five runs).
				var took []time.Duration
				for i := range 7 {
					start := time.Now()
					c, err := s.ClaimTx(ctx, 100)
					took = append(took, time.Since(start))
					if err != nil {
						t.Fatal(err)
					}
					recs := c.Records()
					c.Abort()
					t.Logf("claim %d: %d rows in %v", i, len(recs), took[i])
					want := min(100, tc.others)
					if len(recs) != want {
						t.Fatalf("claim %d: %d rows, want %d heads of the other aggregates", i, len(recs), want)
					}
					for j, r := range recs {
						if r.AggregateID == "deep" {
							t.Fatalf("claim %d took row %d of the deep aggregate, whose head is held", i, r.ID)
						}
						if wantAgg := fmt.Sprintf("o%d", j+1); r.AggregateID != wantAgg {
							t.Fatalf("claim %d: row %d is of %s, want the oldest heads first (%s)", i, j, r.AggregateID, wantAgg)
						}
					}
				}
				if n := postgres.Fallbacks(s) - fallbacks; n != 7 {
					t.Fatalf("%d of 7 claims ran the fallback, want every one (the window is full of held rows)", n)
				}
				slices.Sort(took)
				t.Logf("median claim %v, a scan of the table %v: %.1fx", took[3], ref, float64(took[3])/float64(ref))
				if took[3] > tc.median {
					t.Fatalf("median claim behind a deep held aggregate took %v (all: %v), want at most %v", took[3], took, tc.median)
				}
			})
		}
	}
}

// A producer that writes an explicit id below the claim floor for an
// aggregate that also has rows from the sequence above it: the claims must
// deliver that aggregate in id order all the same, the explicit row first,
// never its later rows before it, and at once: the look below the floor
// (floor.go) is an hour away here, so the claim itself must find the row.
// The aggregate's rows above the floor may be among a claim's first rows,
// or behind more rows of others than one claim takes (a claim probes below
// the floor only for the aggregates of the rows it can take).
func TestFloorExplicitIDKeepsAggregateOrder(t *testing.T) {
	for _, ahead := range []int{0, 150} {
		t.Run(fmt.Sprintf("%d rows ahead", ahead), func(t *testing.T) { floorExplicitID(t, ahead) })
	}
}

func floorExplicitID(t *testing.T, ahead int) {
	s := floorStore(t, time.Hour, nil)
	ctx := context.Background()
	raiseFloor(t, s)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO `+s.Tables().Outbox+` (id, event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (-7, $1, 'T', 'x', 'E', '{}')`, txbox.NewID()); err != nil {
		t.Fatal(err)
	}
	if ahead > 0 {
		writeRows(t, s, "b", ahead)
	}
	writeRows(t, s, "x", 5)
	var order []int64
	deadline := time.Now().Add(10 * time.Second)
	for len(order) < 6 && time.Now().Before(deadline) {
		for _, r := range drainOnce(t, s, 100) {
			if r.AggregateID == "x" {
				order = append(order, r.ID)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(order) != 6 {
		t.Fatalf("delivered %v of aggregate x, want 6 rows", order)
	}
	if order[0] != -7 {
		t.Fatalf("aggregate x delivered as %v: its rows above the floor went before the explicit id -7 below it", order)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("aggregate x delivered out of order: %v", order)
		}
	}
}

// scanTime is the median of three reads of the whole outbox table in id
// order: what this machine, as loaded as it is now, takes to read every
// row once.
func scanTime(t *testing.T, s *postgres.Store) time.Duration {
	t.Helper()
	var took []time.Duration
	for range 3 {
		start := time.Now()
		var n int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM (SELECT aggregate_id FROM `+s.Tables().Outbox+` ORDER BY id) r`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[1]
}
