package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres"
)

// A relay whose connection is killed (pg_terminate_backend, a network cut,
// the process dying) loses its claim at once: the rows are claimable by the
// next claimer without waiting for any lease, its Finish fails, and nothing
// it tried to mark is recorded.
func TestTxClaimReleasedWhenConnectionDies(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	tb := s.Tables().Outbox
	for i := range 3 {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO `+tb+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'Order', 'o-1', 'E', '{}')`, txbox.NewID()); err != nil {
			t.Fatal(i, err)
		}
	}
	c1, err := s.ClaimTx(ctx, 10)
	if err != nil || len(c1.Records()) != 3 {
		t.Fatalf("claim: %v %v", err, c1)
	}
	t.Cleanup(c1.Abort)
	other, err := s.ClaimTx(ctx, 10)
	if err != nil || len(other.Records()) != 0 {
		t.Fatalf("held rows claimed twice: %v", err)
	}
	// Kill every backend holding a lock on the outbox table: the claim's.
	var killed int
	if err := s.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
		WHERE l.relation = $1::regclass AND l.mode = 'RowShareLock' AND l.pid <> pg_backend_pid()`, tb).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d backends, want the claim's one", killed)
	}
	// pg_terminate_backend only signals; the rows are free once the backend
	// has exited, which takes milliseconds, not a lease.
	// The next claimer is another relay process: a store of its own.
	s2, err := postgres.Open(ctx, testenv.URL(t, "TXBOX_TEST_POSTGRES"), postgres.Options{Tables: s.Tables()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var c2 claimapi.Claim
	start := time.Now()
	for {
		if c2, err = s2.ClaimTx(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if len(c2.Records()) > 0 || time.Since(start) > 5*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer c2.Abort()
	if len(c2.Records()) != 3 {
		t.Fatalf("after the holder's connection died the rows must be claimable, got %d after %v", len(c2.Records()), time.Since(start))
	}
	t.Logf("rows claimable again %v after the holder was terminated", time.Since(start).Round(time.Millisecond))
	ids := []int64{c1.Records()[0].ID}
	if err := c1.Finish(ctx, ids, nil); err == nil {
		t.Fatal("Finish on a dead connection reported success")
	}
	c2.Abort()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts["SENT"] != 0 || st.Counts["PENDING"] != 3 {
		t.Fatalf("after the dead claim: %v", st.Counts)
	}
}

// A claim leaves out rows another transaction has locked, with their
// aggregates' later rows, and takes rows whose last locker has ended,
// whether it rolled back or committed without changing them: the claim
// reads lockers from the rows' xmax (queries/window.sql, busy), and a stale xmax must
// not keep a row from delivery.
func TestTxClaimRowsLockedElsewhere(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	tb := s.Tables().Outbox
	ids := map[string]int64{}
	for _, r := range []struct{ name, agg string }{{"a1", "A"}, {"b1", "B"}, {"a2", "A"}, {"c1", "C"}, {"d1", "D"}} {
		var id int64
		if err := s.Pool().QueryRow(ctx, `INSERT INTO `+tb+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'Order', $2, 'E', '{}') RETURNING id`, txbox.NewID(), r.agg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[r.name] = id
	}
	names := func(c claimapi.Claim) []string {
		var out []string
		for _, r := range c.Records() {
			for n, id := range ids {
				if id == r.ID {
					out = append(out, n)
				}
			}
		}
		return out
	}
	claim := func(want ...string) {
		t.Helper()
		c, err := s.ClaimTx(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		if got := names(c); !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want %v", got, want)
		}
	}
	lock := func(name string) pgx.Tx {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT id FROM `+tb+` WHERE id = $1 FOR UPDATE`, ids[name]); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	held := lock("a1")
	// Stale lockers: one rolled back, one committed without a change, and a
	// rolled-back update (its xmax is an aborted updater's).
	if err := lock("b1").Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock("c1").Commit(ctx); err != nil {
		t.Fatal(err)
	}
	upd := lock("d1")
	if _, err := upd.Exec(ctx, `UPDATE `+tb+` SET headers = '{}' WHERE id = $1`, ids["d1"]); err != nil {
		t.Fatal(err)
	}
	if err := upd.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	claim("b1", "c1", "d1")
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	claim("a1", "b1", "a2", "c1", "d1")
}
