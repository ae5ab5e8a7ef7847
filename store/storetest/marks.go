package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// The relay's marks where the way out or the database gets in the way: a
// broker outage spends no attempt, a mark the database refuses is isolated
// to its row, and an id handed out again is still markable.

// testOutageSpendsNoAttempt: a failure of the way out (store.Failure with
// Outage) puts the row back to RETRY after its delay, blocking its
// aggregate as any retry does, with retry_count as it was, through every
// way a store records failures: the lease-fenced MarkFailed and, where the
// store has them, a transaction claim's Finish. An ordinary failure in the
// same call still spends one: were every failure to spend an attempt, a
// broker outage longer than the retry schedule would send the backlog to
// DEAD.
func testOutageSpendsNoAttempt(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	a1, a2, b1 := ev("a", 1), ev("a", 2), ev("b", 1)
	write(t, h, s, a1, a2, b1)
	const rounds = 3
	for round := range rounds {
		lease := fmt.Sprintf("L%d", round)
		got := claim(t, s, lease, 10, time.Minute)
		want := []string{a1.ID, a2.ID}
		if round == 0 {
			want = []string{a1.ID, a2.ID, b1.ID}
		}
		if !slices.Equal(inOrder(got), want) {
			t.Fatalf("round %d: claimed %v, want %v", round, inOrder(got), want)
		}
		// a1's way out fails (due again at once), a2 waits behind it; in
		// the first round b1 fails for a reason of its own (for an hour).
		fs := []store.Failure{{ID: got[0].ID, Error: "broker unavailable", Outage: true}}
		if round == 0 {
			fs = append(fs, store.Failure{ID: got[2].ID, Error: "refused by the broker", Delay: time.Hour})
		}
		n, err := s.MarkFailed(ctx, lease, fs)
		mustMark(t, n, err, int64(len(fs)), "mark failed")
		n, err = s.Release(ctx, lease, []int64{got[1].ID})
		mustMark(t, n, err, 1, "release")
	}
	if recs, err := s.List(ctx, store.Filter{EventIDs: []string{b1.ID}}); err != nil || len(recs) != 1 || recs[0].RetryCount != 1 {
		t.Fatalf("the ordinary failure must spend one attempt: %+v %v", recs, err)
	}
	recs, err := s.List(ctx, store.Filter{EventIDs: []string{a1.ID}})
	if err != nil || len(recs) != 1 {
		t.Fatalf("list a1: %v %v", recs, err)
	}
	if r := recs[0]; r.Status != txbox.StatusRetry || r.RetryCount != 0 || r.LastError != "broker unavailable" || r.NextRetryAt == nil {
		t.Fatalf("after %d outage failures a1 = status %s, retry_count %d, last_error %q: want RETRY, 0, the error", rounds, r.Status, r.RetryCount, r.LastError)
	}
	if _, ok := s.(claimapi.TxClaimer); !ok {
		return
	}
	c := claimTx(t, s, 10)
	r := c.Records()
	if !slices.Equal(inOrder(r), []string{a1.ID, a2.ID}) {
		t.Fatalf("transaction claim: want a1, a2 in order, got %v", inOrder(r))
	}
	if err := c.Finish(ctx, nil, []store.Failure{{ID: r[0].ID, Error: "no stream for the subject", Delay: time.Hour, Outage: true}}); err != nil {
		t.Fatal(err)
	}
	recs, err = s.List(ctx, store.Filter{EventIDs: []string{a1.ID}})
	if err != nil || len(recs) != 1 || recs[0].RetryCount != 0 || recs[0].Status != txbox.StatusRetry {
		t.Fatalf("after a transaction claim's outage failure a1 = %+v %v: want RETRY with retry_count 0", recs, err)
	}
	if got := claim(t, s, "after", 10, time.Minute); len(got) != 0 {
		t.Fatalf("a1 waits an hour and a2 behind it; claimed %v", eventIDs(got))
	}
}

// refuseMark makes the database refuse marking eventID sent, as a
// constraint or trigger an operator added would: a CHECK on the archive
// where there is one, else a trigger on the outbox table.
func refuseMark(t *testing.T, h Harness, s store.Store, eventID string) {
	t.Helper()
	tb := s.Tables()
	var q string
	switch s.Dialect().Name() {
	case "sqlite":
		q = fmt.Sprintf(`CREATE TRIGGER refuse_%s BEFORE UPDATE OF status ON %s WHEN NEW.status = 'SENT' AND OLD.event_id = '%s'
			BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`, tb.Outbox, tb.Outbox, eventID)
	default:
		q = fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT refuse_test CHECK (event_id <> '%s')`, tb.Qualified(tb.Outbox+"_sent"), eventID)
	}
	execSQL(t, h, s, q)
}

// testRefusedMark: a mark the database refuses for a row's own reason is
// reported as store.ErrRefused (so the relay can isolate the row instead
// of retrying the whole batch for ever) and changes nothing; the other rows
// can be marked on their own. A transaction claim that can isolate
// (claimapi.IsolatingClaim) marks every other row and records the refused one
// as failed.
func testRefusedMark(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	evs := []txbox.Event{ev("r1", 0), ev("r2", 0), ev("r3", 0), ev("r4", 0)}
	write(t, h, s, evs...)
	refuseMark(t, h, s, evs[1].ID)
	got := claim(t, s, "L", 10, time.Minute)
	if len(got) != 4 {
		t.Fatalf("claimed %d", len(got))
	}
	n, err := s.MarkSent(ctx, "L", ids(got))
	if !errors.Is(err, store.ErrRefused) || n != 0 {
		t.Fatalf("refused mark: %d, %v; want 0 and an error matching store.ErrRefused", n, err)
	}
	var others []int64
	for _, r := range got {
		if r.EventID != evs[1].ID {
			others = append(others, r.ID)
		}
	}
	mustMark(t, must(s.MarkSent(ctx, "L", others)), nil, 3, "the other rows")

	if _, ok := s.(claimapi.TxClaimer); !ok {
		return
	}
	s = open(t, h)
	evs = []txbox.Event{ev("t1", 0), ev("t2", 0), ev("t3", 0), ev("t4", 0), ev("t5", 0)}
	write(t, h, s, evs...)
	refuseMark(t, h, s, evs[2].ID)
	c := claimTx(t, s, 10)
	ic, ok := c.(claimapi.IsolatingClaim)
	if !ok {
		c.Abort()
		t.Fatalf("%T: transaction claims cannot isolate a refused mark", c)
	}
	var refused []int64
	err = ic.FinishIsolating(ctx, ids(c.Records()), nil, func(id int64, err error) store.Failure {
		refused = append(refused, id)
		return store.Failure{ID: id, Error: "refused: " + err.Error(), Delay: time.Hour}
	})
	if err != nil || len(refused) != 1 {
		t.Fatalf("FinishIsolating: %v, refused %v", err, refused)
	}
	st, _ := s.Stats(ctx)
	if st.Counts[txbox.StatusSent] != 4 || st.Counts[txbox.StatusRetry] != 1 {
		t.Fatalf("after isolating: %v", st.Counts)
	}
	recs, _ := s.List(ctx, store.Filter{EventIDs: []string{evs[2].ID}})
	if len(recs) != 1 || recs[0].ID != refused[0] || recs[0].RetryCount != 1 {
		t.Fatalf("refused row: %+v", recs)
	}
}

// testReusedIDs: an id handed out again (TRUNCATE ... RESTART IDENTITY, a
// producer writing explicit ids) for a row whose earlier holder was already
// delivered must be deliverable and markable: an archive keyed on id alone
// refused every marking transaction that carried it, and the relay
// republished its batches for ever.
func testReusedIDs(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	first := ev("reused", 0)
	write(t, h, s, first)
	got := claim(t, s, "L1", 10, time.Minute)
	if len(got) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(got))
	}
	id := got[0].ID
	mustMark(t, must(s.MarkSent(ctx, "L1", []int64{id})), nil, 1, "first sent")

	// What a RESTART IDENTITY does to the next insert: the same id again.
	// Stores that keep SENT rows in the outbox table (SQLite) lose the
	// delivered row to the truncate first.
	table := s.Tables().Qualified(s.Tables().Outbox)
	second := txbox.NewID()
	execSQL(t, h, s,
		fmt.Sprintf(`DELETE FROM %s WHERE id = %d`, table, id),
		fmt.Sprintf(`INSERT INTO %s (id, event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (%d, '%s', 'Order', 'reused', 'OrderEvent', '{}')`, table, id, second))
	got = claim(t, s, "L2", 10, time.Minute)
	if len(got) != 1 || got[0].ID != id || got[0].EventID != second {
		t.Fatalf("claim after the id was reused: %+v", got)
	}
	mustMark(t, must(s.MarkSent(ctx, "L2", []int64{id})), nil, 1, "reused id sent")
	recs, err := s.List(ctx, store.Filter{EventIDs: []string{second}})
	if err != nil || len(recs) != 1 || recs[0].Status != txbox.StatusSent {
		t.Fatalf("the row with the reused id: %+v %v", recs, err)
	}
	if n, err := store.Cleanup(ctx, s, 0, 10); err != nil || n < 1 {
		t.Fatalf("cleanup of rows sharing an id: %d %v", n, err)
	}
}
