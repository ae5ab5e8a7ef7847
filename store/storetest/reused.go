package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

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
