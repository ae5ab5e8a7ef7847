package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// openPG returns a migrated PostgreSQL store on fresh tables, with an
// orders table (orders(s)) for the business writes beside the events.
func openPG(t *testing.T) *postgres.Store {
	t.Helper()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE `+orders(s)+` (id TEXT PRIMARY KEY, amount INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Pool().Exec(context.Background(), "DROP TABLE IF EXISTS "+orders(s)) })
	return s
}

func orders(s *postgres.Store) string {
	return "orders_" + s.Tables().Outbox
}

func pending(t *testing.T, s *postgres.Store) []store.Record {
	t.Helper()
	recs, err := s.List(context.Background(), store.Filter{Status: txbox.StatusPending, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestCommitEmitsAllInOrderRollbackNothing_Pgx(t *testing.T) {
	s := openPG(t)
	ctx := context.Background()
	w := outbox.NewWriter(s.Dialect())

	// Rolled back: the order and its events vanish together.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+orders(s)+` VALUES ('o-1', 10)`); err != nil {
		t.Fatal(err)
	}
	if err := pgxtx.Add(ctx, tx, w, txbox.MustEvent("Order", "o-1", "OrderCreated", map[string]int{"amount": 10})); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s); len(got) != 0 {
		t.Fatalf("rollback emitted %d events", len(got))
	}

	// Committed: every event of the transaction, in the order written.
	var evs []txbox.Event
	for _, typ := range []string{"OrderCreated", "OrderPaid", "OrderShipped"} {
		evs = append(evs, txbox.MustEvent("Order", "o-2", typ, nil))
	}
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders(s)+` VALUES ('o-2', 20)`); err != nil {
			return err
		}
		return pgxtx.Add(ctx, tx, w, evs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := pending(t, s)
	if len(got) != 3 {
		t.Fatalf("commit emitted %d events, want 3", len(got))
	}
	for i := range got {
		if got[i].EventID != evs[i].ID || got[i].EventType != evs[i].Type {
			t.Fatalf("event %d: %s/%s, want %s/%s", i, got[i].EventID, got[i].EventType, evs[i].ID, evs[i].Type)
		}
	}
}

func TestDatabaseSQLTx(t *testing.T) {
	s := openPG(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()
	w := outbox.NewWriter(s.Dialect())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSQL(ctx, tx, txbox.MustEvent("Order", "o-1", "A", nil), txbox.MustEvent("Order", "o-1", "B", nil)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s); len(got) != 2 {
		t.Fatalf("got %d", len(got))
	}
}

func TestUnitOfWorkFlushesBeforeCommit(t *testing.T) {
	s := openPG(t)
	ctx := context.Background()
	w := outbox.NewWriter(s.Dialect())
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()

	// Domain code records through the context; the flush happens at commit.
	placeOrder := func(ctx context.Context, tx *sql.Tx, id string) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+orders(s)+` VALUES ($1, 5)`, id); err != nil {
			return err
		}
		return outbox.Record(ctx, txbox.MustEvent("Order", id, "OrderCreated", map[string]string{"id": id}))
	}
	err := w.RunSQL(ctx, db, nil, func(ctx context.Context, tx *sql.Tx, rec *outbox.Recorder) error {
		if err := placeOrder(ctx, tx, "o-1"); err != nil {
			return err
		}
		rec.Record(txbox.MustEvent("Order", "o-1", "OrderConfirmed", nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := pending(t, s)
	if len(got) != 2 || got[0].EventType != "OrderCreated" {
		t.Fatalf("unit of work emitted %d", len(got))
	}

	// A flush that fails rolls the business change back too.
	dup := txbox.MustEvent("Order", "o-2", "OrderCreated", nil)
	dup.ID = got[0].EventID // unique violation at flush time
	err = pgxtx.Run(ctx, s.Pool(), w, func(ctx context.Context, tx pgx.Tx, rec *outbox.Recorder) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders(s)+` VALUES ('o-2', 7)`); err != nil {
			return err
		}
		rec.Record(dup)
		return nil
	})
	if err == nil {
		t.Fatal("flush of a duplicate event id must fail")
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+orders(s)+` WHERE id = 'o-2'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("business row survived a failed flush: n=%d err=%v", n, err)
	}

	// A handler error rolls back and emits nothing.
	boom := errors.New("boom")
	err = pgxtx.Run(ctx, s.Pool(), w, func(ctx context.Context, tx pgx.Tx, rec *outbox.Recorder) error {
		rec.Record(txbox.MustEvent("Order", "o-3", "OrderCreated", nil))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got := pending(t, s); len(got) != 2 {
		t.Fatalf("failed unit of work emitted events: %d", len(got))
	}
	if err := outbox.Record(ctx, dup); !errors.Is(err, outbox.ErrNoUnitOfWork) {
		t.Fatalf("Record outside a unit of work: %v", err)
	}
}

func TestInvalidEventRejectedBeforeSQL(t *testing.T) {
	w := outbox.NewWriter(postgres.Dialect{})
	err := w.Add(context.Background(), nil, txbox.Event{Type: "X", AggregateType: "A"})
	if !errors.Is(err, txbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "aggregate id") {
		t.Fatalf("err = %v", err)
	}
}
