package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// On an inbox table without statistics (fresh, autovacuum off or not yet
// run), a prepared statement's generic plan rates the monitor index
// (consumer_name, status, received_at) as cheap as the primary key for
// "event_id = $1 AND consumer_name = $2", and may keep it: every keyed
// statement then reads all rows of the consumer. The inbox's keyed
// statements must plan on the primary key whatever the statistics.
func TestInboxKeyedStatementsPlanOnThePrimaryKey(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	inboxTable := s.Tables().Inbox
	plan := func(name, where string) string {
		t.Helper()
		if _, err := conn.Exec(ctx, `PREPARE `+name+`(varchar, varchar) AS SELECT status FROM `+inboxTable+` WHERE `+where+` FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+name+`('e', 'c')`, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), `RESET plan_cache_mode; DEALLOCATE ALL`) }()
	if p := plan("naive", `event_id = $1 AND consumer_name = $2`); !strings.Contains(p, "monitor_idx") {
		t.Logf("this server plans the plain key on the primary key anyway:\n%s", p)
	}
	if p := plan("keyed", postgres.InboxKey); !strings.Contains(p, "_pkey") || strings.Contains(p, "monitor_idx") {
		t.Fatalf("inbox key planned off the primary key:\n%s", p)
	}
}

// InboxInsertProcessed inserts, PROCESSED, the rows of first deliveries in
// one statement and says which; an event with a row, or given twice, is
// left to InboxAcquireProcessed. InboxForget removes rows it inserted.
func TestInboxInsertProcessedAndForget(t *testing.T) {
	s := migratedStore(t, postgres.Options{})
	ctx := context.Background()
	d := s.InboxDialect().(interface {
		store.InboxDialect
		store.InboxProcessedAcquirer
		store.InboxBatchInserter
	})
	inTx := func(fn func(tx store.Tx) error) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return fn(pgxtx.Wrap(tx)) }); err != nil {
			t.Fatal(err)
		}
	}
	ev := func(agg string) txbox.Event { return txbox.MustEvent("Order", agg, "OrderCreated", nil) }
	a, b, c, other := ev("a"), ev("b"), ev("c"), ev("o")
	inTx(func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", b, "boom", 5, txbox.StatusRetry)
		return err
	})
	inTx(func(tx store.Tx) error {
		st, _, err := d.InboxAcquireProcessed(ctx, tx, "c1", c)
		if err == nil && st != store.InboxFresh {
			t.Errorf("c: state %v", st)
		}
		return err
	})
	inTx(func(tx store.Tx) error {
		fresh, err := d.InboxInsertProcessed(ctx, tx, "c1", []txbox.Event{a, b, a, c, other})
		if err != nil {
			return err
		}
		if want := []bool{true, false, false, false, true}; len(fresh) != len(want) || fresh[0] != want[0] || fresh[1] != want[1] ||
			fresh[2] != want[2] || fresh[3] != want[3] || fresh[4] != want[4] {
			t.Errorf("fresh %v, want %v", fresh, want)
		}
		// The second copy of a finds its own row: a duplicate.
		if st, _, err := d.InboxAcquireProcessed(ctx, tx, "c1", a); err != nil || st != store.InboxDuplicate {
			t.Errorf("a again: %v %v", st, err)
		}
		// b comes back after its failed attempt: run again, marked processed.
		if st, n, err := d.InboxAcquireProcessed(ctx, tx, "c1", b); err != nil || st != store.InboxRetry || n != 1 {
			t.Errorf("b: %v %d %v", st, n, err)
		}
		return d.InboxForget(ctx, tx, "c1", []string{other.ID})
	})
	rows, err := s.InboxList(ctx, store.InboxFilter{Consumer: "c1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.InboxRow{}
	for _, r := range rows {
		got[r.EventID] = r
	}
	if len(got) != 3 {
		t.Fatalf("%d rows, want a, b, c (other forgotten): %+v", len(got), rows)
	}
	for _, e := range []txbox.Event{a, b, c} {
		if r := got[e.ID]; r.Status != txbox.StatusProcessed || r.ProcessedAt == nil || r.Event.Payload != nil {
			t.Errorf("%s: %+v", e.AggregateID, r)
		}
	}
	if r := got[b.ID]; r.RetryCount != 1 || r.ErrorMessage != "boom" {
		t.Errorf("b keeps its failed attempt: %+v", r)
	}
}
