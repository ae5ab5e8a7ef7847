package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// floorStore is a migrated store whose claims read from the bottom every
// rescan.
func floorStore(t *testing.T, rescan time.Duration, log *slog.Logger) *postgres.Store {
	t.Helper()
	s := migratedStore(t, postgres.Options{Logger: log})
	postgres.SetFloorRescan(s, rescan)
	return s
}

func writeRows(t *testing.T, s *postgres.Store, agg string, n int) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO `+s.Tables().Outbox+`
		(event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid()::text, 'T', $1, 'E', '{}' FROM generate_series(1, $2)`, agg, n)
	if err != nil {
		t.Fatal(err)
	}
}

// drainOnce claims up to limit rows and marks them sent.
func drainOnce(t *testing.T, s *postgres.Store, limit int) []store.Record {
	t.Helper()
	ctx := context.Background()
	c, err := s.ClaimTx(ctx, limit)
	if err != nil {
		t.Fatal(err)
	}
	recs := c.Records()
	ids := make([]int64, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := c.Finish(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	return recs
}

// drainAll claims and marks sent until no row is left.
func drainAll(t *testing.T, s *postgres.Store) {
	t.Helper()
	for len(drainOnce(t, s, 100)) > 0 {
	}
}

// raiseFloor writes 200 rows of the aggregate "a", delivers them, and
// churns until the floor has passed the first 100 of them.
func raiseFloor(t *testing.T, s *postgres.Store) {
	t.Helper()
	writeRows(t, s, "a", 200)
	drainAll(t, s)
	if !churnUntil(t, s, 10*time.Second, func() bool { return postgres.Floor(s) > 100 }) {
		t.Fatalf("the floor did not rise past 100: %d", postgres.Floor(s))
	}
}

// churn keeps claiming (and writing a row now and then) for d, so the floor
// gets every chance to advance.
func churn(t *testing.T, s *postgres.Store, d time.Duration) {
	t.Helper()
	churnUntil(t, s, d, func() bool { return false })
}

// churnUntil churns until done, or for at most d. The floor waits for every
// transaction in the cluster that was running when it looked, so other
// tests' transactions (packages run in parallel) can hold it back a while.
func churnUntil(t *testing.T, s *postgres.Store, d time.Duration, done func() bool) bool {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if done() {
			return true
		}
		writeRows(t, s, "churn", 5)
		drainOnce(t, s, 100)
		time.Sleep(5 * time.Millisecond)
	}
	return done()
}

// The floor moves up as rows are delivered: claims stop reading the index
// entries of delivered rows.
func TestFloorAdvances(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	writeRows(t, s, "a", 500)
	drainAll(t, s)
	churnUntil(t, s, 10*time.Second, func() bool { return postgres.Floor(s) > 500 })
	var next int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT max(id) FROM `+s.Tables().Outbox+`_sent`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	if f := postgres.Floor(s); f <= 500 || f > next+1 {
		t.Fatalf("floor %d after delivering %d rows: want it past the first 500 and at most %d", f, next, next+1)
	}
}

// A row whose transaction took its id before the floor moved and commits
// after is still claimed: the floor waits for every transaction that was
// running when it looked.
func TestFloorWaitsForLateCommit(t *testing.T) {
	lateRow(t, func(ctx context.Context, s *postgres.Store, tx pgx.Tx) (id int64, commit func() error) {
		err := tx.QueryRow(ctx, `INSERT INTO `+s.Tables().Outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'T', 'late', 'E', '{}') RETURNING id`, txbox.NewID()).Scan(&id)
		return id, func() error { return err }
	})
}

// A transaction that took its id from the sequence but has not written yet
// has no xid (a slow BEFORE trigger, an INSERT waiting on a conflicting
// one): the floor waits for it by its virtual transaction id.
func TestFloorWaitsForIDTakenBeforeWrite(t *testing.T) {
	lateRow(t, func(ctx context.Context, s *postgres.Store, tx pgx.Tx) (id int64, write func() error) {
		err := tx.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id'))`, s.Tables().Outbox).Scan(&id)
		return id, func() error {
			if err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+s.Tables().Outbox+` (id, event_id, aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, $2, 'T', 'slow', 'E', '{}')`, id, txbox.NewID())
			return err
		}
	})
}

// lateRow opens a transaction that takes an id (start), lets other rows
// commit and be delivered for a while, checks the floor stayed at or below
// that id, then lets the transaction write what is left and commit, and
// waits for its row to be claimed.
func lateRow(t *testing.T, start func(context.Context, *postgres.Store, pgx.Tx) (int64, func() error)) {
	t.Helper()
	s := floorStore(t, time.Hour, nil)
	ctx := context.Background()
	writeRows(t, s, "early", 50)
	drainAll(t, s)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	id, finish := start(ctx, s, tx)
	churn(t, s, 600*time.Millisecond)
	if f := postgres.Floor(s); f > id {
		t.Fatalf("floor %d passed id %d, held by a transaction still open", f, id)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		writeRows(t, s, "after", 5)
		for _, r := range drainOnce(t, s, 100) {
			if r.ID == id {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("row %d, committed late, was never claimed (floor %d)", id, postgres.Floor(s))
}

// A replayed dead row gets a new id at the end of the queue: the floor has
// passed its old one.
func TestFloorReplay(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	ctx := context.Background()
	writeRows(t, s, "poison", 1)
	c, err := s.ClaimTx(ctx, 10)
	if err != nil || len(c.Records()) != 1 {
		t.Fatalf("claim: %v", err)
	}
	old := c.Records()[0]
	if err := c.Finish(ctx, nil, []store.Failure{{ID: old.ID, Error: "bad", Dead: true}}); err != nil {
		t.Fatal(err)
	}
	churnUntil(t, s, 10*time.Second, func() bool { return postgres.Floor(s) > old.ID })
	if f := postgres.Floor(s); f <= old.ID {
		t.Fatalf("floor %d did not pass the dead row %d", f, old.ID)
	}
	if n, err := s.Replay(ctx, store.Filter{EventIDs: []string{old.EventID}}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	got := drainOnce(t, s, 100)
	if len(got) != 1 || got[0].EventID != old.EventID || got[0].ID <= old.ID {
		t.Fatalf("after replay: %+v, want event %s with a new id above %d", got, old.EventID, old.ID)
	}
}

// A row below the floor that the rules say cannot exist (an id written by
// hand) is found by the periodic rescan, and the log says so.
func TestFloorRescanFindsStrayRow(t *testing.T) {
	var buf testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	s := floorStore(t, 200*time.Millisecond, log)
	ctx := context.Background()
	raiseFloor(t, s)
	var stray int64
	if err := s.Pool().QueryRow(ctx, `INSERT INTO `+s.Tables().Outbox+` (id, event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (-1, $1, 'T', 'stray', 'E', '{}') RETURNING id`, txbox.NewID()).Scan(&stray); err != nil {
		t.Fatal(err)
	}
	// The rescan lowers the floor only once every transaction that was
	// running in the cluster has ended, and on a shared, loaded server that
	// can take seconds: the bound is generous, and a found row ends the wait.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range drainOnce(t, s, 100) {
			if r.ID == stray {
				if !strings.Contains(buf.String(), "below the claim floor") {
					t.Fatalf("found the stray row without a warning; log:\n%s", buf.String())
				}
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the stray row below the floor was never claimed")
}

// With a cached id sequence the floor stays off: ids from a cached range
// arrive out of order.
func TestFloorOffWithCachedSequence(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `ALTER TABLE `+s.Tables().Outbox+` ALTER COLUMN id SET CACHE 20`); err != nil {
		t.Fatal(err)
	}
	writeRows(t, s, "a", 300)
	drainAll(t, s)
	churn(t, s, 150*time.Millisecond)
	if f := postgres.Floor(s); f > 0 {
		t.Fatalf("floor %d with a cached sequence, want none", f)
	}
}
