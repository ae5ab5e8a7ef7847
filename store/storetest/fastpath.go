package storetest

import (
	"context"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// The optional inbox fast paths (store.InboxProcessedAcquirer,
// store.InboxBatchInserter): every store whose dialect has one must give
// the same answers as InboxAcquire followed by InboxDone would. A store
// without one skips the case, saying so.

func processedAcquirer(t *testing.T, d store.InboxDialect) store.InboxProcessedAcquirer {
	p, ok := d.(store.InboxProcessedAcquirer)
	if !ok {
		t.Skipf("skipped: %T does not implement store.InboxProcessedAcquirer", d)
	}
	return p
}

// testInboxAcquireProcessed: a first delivery is fresh and its row
// PROCESSED once committed, without InboxDone; a rolled-back one counts as
// first again; a RETRY row is taken over (retry, with its attempts) and
// left PROCESSED with its stored event cleared; a parked row stays parked;
// a processed one is a duplicate.
func testInboxAcquireProcessed(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	p := processedAcquirer(t, d)
	ctx := ctxT(t)
	acq := func(e txbox.Event, commit bool) (store.InboxState, int) {
		t.Helper()
		tx, commitFn, rollback := h.Begin(t, s)
		st, n, err := p.InboxAcquireProcessed(ctx, tx, "c1", e)
		if err != nil {
			_ = rollback()
			t.Fatalf("InboxAcquireProcessed(%s): %v", e.ID, err)
		}
		end := rollback
		if commit {
			end = commitFn
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
		return st, n
	}

	fresh := ev("a", 1)
	if st, _ := acq(fresh, false); st != store.InboxFresh {
		t.Fatalf("first delivery: %v, want fresh", st)
	}
	if st, _ := acq(fresh, true); st != store.InboxFresh {
		t.Fatalf("after a rolled-back first delivery: %v, want fresh again", st)
	}
	if r := row(t, a, "c1", fresh.ID); r.Status != txbox.StatusProcessed || r.ProcessedAt == nil {
		t.Fatalf("row of a committed first delivery: %+v, want PROCESSED with processed_at", r)
	}
	if st, _ := acq(fresh, true); st != store.InboxDuplicate {
		t.Fatalf("redelivery: %v, want duplicate", st)
	}
	if st, _ := acquire(t, h, s, d, "c1", fresh, ""); st != store.InboxDuplicate {
		t.Fatalf("InboxAcquire after the fast path: %v, want duplicate", st)
	}

	retry := ev("b", 1)
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", retry, "boom", 5, txbox.StatusRetry)
		return err
	})
	if st, n := acq(retry, true); st != store.InboxRetry || n != 1 {
		t.Fatalf("delivery of a RETRY row: %v attempts %d, want retry with 1", st, n)
	}
	if r := row(t, a, "c1", retry.ID); r.Status != txbox.StatusProcessed || r.ProcessedAt == nil || r.RetryCount != 1 || r.Event.Payload != nil {
		t.Fatalf("retried row: %+v, want PROCESSED, 1 attempt, the stored event cleared", r)
	}

	parked := ev("c", 1)
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", parked, "always", 1, txbox.StatusRetry)
		return err
	})
	if st, _ := acq(parked, true); st != store.InboxParked {
		t.Fatalf("delivery of a parked event: %v, want parked", st)
	}
	if r := row(t, a, "c1", parked.ID); r.Status != txbox.StatusDead {
		t.Fatalf("parked row after the fast path: %+v, want DEAD", r)
	}
}

// testInboxInsertProcessed: one statement inserts the rows of the events
// that have none, PROCESSED, and says which (the first of an event given
// twice); InboxForget removes those of events not applied after all, in
// the same transaction; rows that existed before are untouched.
func testInboxInsertProcessed(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	b, ok := d.(store.InboxBatchInserter)
	if !ok {
		t.Skipf("skipped: %T does not implement store.InboxBatchInserter", d)
	}
	ctx := context.Background()
	done, retry := ev("done", 1), ev("retry", 1)
	acquire(t, h, s, d, "c1", done, txbox.StatusProcessed)
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", retry, "boom", 5, txbox.StatusRetry)
		return err
	})
	x, y := ev("x", 1), ev("y", 1)
	batch := []txbox.Event{x, done, y, x, retry}
	var fresh []bool
	InTx(t, h, s, func(tx store.Tx) error {
		var err error
		if fresh, err = b.InboxInsertProcessed(ctx, tx, "c1", batch); err != nil {
			return err
		}
		return b.InboxForget(ctx, tx, "c1", []string{y.ID})
	})
	want := []bool{true, false, true, false, false}
	for i := range want {
		if i >= len(fresh) || fresh[i] != want[i] {
			t.Fatalf("InboxInsertProcessed fresh = %v, want %v (x, done, y, x again, retry)", fresh, want)
		}
	}
	if r := row(t, a, "c1", x.ID); r.Status != txbox.StatusProcessed || r.ProcessedAt == nil {
		t.Fatalf("inserted row: %+v, want PROCESSED", r)
	}
	if st, _ := acquire(t, h, s, d, "c1", y, ""); st != store.InboxFresh {
		t.Fatalf("event forgotten in its transaction: %v, want a first delivery", st)
	}
	if r := row(t, a, "c1", retry.ID); r.Status != txbox.StatusRetry || r.RetryCount != 1 {
		t.Fatalf("existing RETRY row: %+v, want it untouched", r)
	}
	if st, _ := acquire(t, h, s, d, "c2", x, ""); st != store.InboxFresh {
		t.Fatalf("another consumer: %v, want fresh", st)
	}
}
