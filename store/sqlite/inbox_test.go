package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

func openInboxTest(t *testing.T, dsnParams string) *Store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "inbox.db")+"?"+dsnParams)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(db, Options{Tables: store.Tables{Outbox: "ob", Inbox: "ib"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// The consumer's transactions are the application's: on a pool without
// _txlock=immediate they are DEFERRED. Every inbox transaction starts with a
// write, so it waits for the write lock on the busy timeout instead of
// failing with SQLITE_BUSY on a read-to-write upgrade. Many consumers on
// overlapping events, in WAL mode, with handlers that read and write and
// sometimes fail: no error, and every event applied at most once (exactly
// once when its row says PROCESSED).
func TestInboxDeferredTransactionsUnderContention(t *testing.T) {
	s := openInboxTest(t, "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	ctx := context.Background()
	d := s.InboxDialect()
	if _, err := s.db.Exec(`CREATE TABLE effects (event_id TEXT NOT NULL, worker INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	events := make([]txbox.Event, 12)
	for i := range events {
		events[i] = txbox.MustEvent("Order", fmt.Sprintf("o-%d", i%4), "OrderPlaced", map[string]int{"n": i})
	}
	const workers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				e := events[rand.IntN(len(events))]
				if err := deliver(ctx, s, d, e, w, rand.IntN(4) == 0); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rows, err := s.InboxList(ctx, store.InboxFilter{Consumer: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM effects WHERE event_id = ?`, r.EventID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[r.Status == txbox.StatusProcessed]; n != want {
			t.Errorf("event %s (%s): applied %d times, want %d", r.EventID, r.Status, n, want)
		}
	}
}

// deliver is the consumer's inbox transaction, and its failure path.
func deliver(ctx context.Context, s *Store, d store.InboxDialect, e txbox.Event, worker int, fail bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, _, err := d.InboxAcquire(ctx, store.SQLTx(tx), "c", e)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if st == store.InboxDuplicate || st == store.InboxParked {
		return tx.Commit()
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effects`).Scan(&n); err != nil {
		return fmt.Errorf("handler read: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id, worker) VALUES (?, ?)`, e.ID, worker); err != nil {
		return fmt.Errorf("handler write: %w", err)
	}
	if fail {
		if err := tx.Rollback(); err != nil {
			return err
		}
		ftx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer ftx.Rollback()
		if _, _, err := d.InboxFail(ctx, store.SQLTx(ftx), "c", e, "boom", 1000, txbox.StatusRetry); err != nil {
			return fmt.Errorf("fail: %w", err)
		}
		return ftx.Commit()
	}
	if err := d.InboxDone(ctx, store.SQLTx(tx), "c", e.ID, txbox.StatusProcessed, ""); err != nil {
		return fmt.Errorf("done: %w", err)
	}
	return tx.Commit()
}

// The stored event comes back whole, timestamps to the microsecond, and the
// received_at filter works on the stored microseconds.
func TestInboxRoundTrip(t *testing.T) {
	s := openInboxTest(t, "_pragma=busy_timeout(5000)")
	ctx := context.Background()
	e := txbox.MustEvent("Order", "o-1", "OrderPlaced", map[string]int{"n": 1})
	e.OccurredAt = time.Date(2024, 2, 29, 12, 34, 56, 123456000, time.UTC)
	e.AggregateVersion = 9
	e.Headers = map[string]string{"traceparent": "00-abc-def-01", "x": "ü"}
	before := time.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InboxDialect().InboxFail(ctx, store.SQLTx(tx), "c", e, "boom", 5, txbox.StatusRetry); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := s.InboxList(ctx, store.InboxFilter{Since: before.Add(-time.Millisecond), Until: time.Now().Add(time.Millisecond)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %v %d", err, len(rows))
	}
	got := rows[0]
	if !got.Event.OccurredAt.Equal(e.OccurredAt) || got.Event.AggregateVersion != 9 || got.Event.Headers["x"] != "ü" ||
		string(got.Event.Payload) != string(e.Payload) || got.ReceivedAt.Before(before.Truncate(time.Microsecond)) || got.ProcessedAt != nil {
		t.Fatalf("row: %+v", got)
	}
	if rows, err := s.InboxList(ctx, store.InboxFilter{Until: before.Add(-time.Second)}); err != nil || len(rows) != 0 {
		t.Fatalf("until filter: %v %d", err, len(rows))
	}
}

// The inbox's queries stay on its indexes as processed history grows.
func TestInboxQueryPlans(t *testing.T) {
	s := openInboxTest(t, "_pragma=busy_timeout(5000)")
	in := newInboxQueries(s.inboxTable())
	f := store.InboxFilter{Consumer: "c", Status: txbox.StatusReplay, Limit: 10}
	where, args := inboxFilter(f, 1)
	checkPlans(t, s, regexp.MustCompile(`^SCAN ib(_versions)?$`), []planStatement{
		{"lookup", in.inboxLookup, []any{"e", "c"}},
		{"replays", sqlinbox.ListQuery(s.inboxTable(), where, f), args},
		{"cleanup", s.q.inboxCleanup, []any{1, 1}},
		{"version", in.versionRead, []any{"c", "t", "i"}},
	})
}
