package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// RunInbox runs the inbox cases: every store with an InboxDialect method
// (the inbox SQL, as store.InboxStore has it) which implements
// store.InboxAdmin passes them.
func RunInbox(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Harness, store.InboxDialect, store.InboxAdmin, store.Store)
	}{
		{"InboxFirstDeliveryThenDuplicate", testInboxDuplicate},
		{"InboxRollbackForgetsDelivery", testInboxRollback},
		{"InboxFailRetryThenProcess", testInboxFailRetry},
		{"InboxParkAndReplay", testInboxParkReplay},
		{"InboxFailAfterProcessedChangesNothing", testInboxFailAfterProcessed},
		{"InboxVersionGuard", testInboxVersion},
		{"InboxConsumersAreIndependent", testInboxConsumers},
		{"InboxCleanup", testInboxCleanup},
		{"InboxConcurrentDeliveries", testInboxConcurrent},
		{"InboxBadBytesInError", testInboxBadBytesInError},
		{"InboxAcquireProcessed", testInboxAcquireProcessed},
		{"InboxInsertProcessed", testInboxInsertProcessed},
		{"InboxUnavailableIsRecognised", testInboxUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, h)
			c.fn(t, h, as[interface{ InboxDialect() store.InboxDialect }](t, s).InboxDialect(), as[store.InboxAdmin](t, s), s)
		})
	}
}

func acquire(t *testing.T, h Harness, s store.Store, d store.InboxDialect, consumer string, e txbox.Event, done txbox.Status) (store.InboxState, int) {
	t.Helper()
	var st store.InboxState
	var n int
	InTx(t, h, s, func(tx store.Tx) error {
		var err error
		if st, n, err = d.InboxAcquire(context.Background(), tx, consumer, e); err != nil || done == "" {
			return err
		}
		if st == store.InboxFresh || st == store.InboxRetry {
			return d.InboxDone(context.Background(), tx, consumer, e.ID, done, "")
		}
		return nil
	})
	return st, n
}

func row(t *testing.T, a store.InboxAdmin, consumer, id string) store.InboxRow {
	t.Helper()
	rows, err := a.InboxList(context.Background(), store.InboxFilter{Consumer: consumer, EventIDs: []string{id}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("inbox row %s/%s: %v, %d rows", consumer, id, err, len(rows))
	}
	return rows[0]
}

func testInboxDuplicate(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	if st, _ := acquire(t, h, s, d, "c1", e, txbox.StatusProcessed); st != store.InboxFresh {
		t.Fatalf("first delivery: %v", st)
	}
	for range 3 {
		if st, _ := acquire(t, h, s, d, "c1", e, ""); st != store.InboxDuplicate {
			t.Fatalf("redelivery: %v, want duplicate", st)
		}
	}
	r := row(t, a, "c1", e.ID)
	if r.Status != txbox.StatusProcessed || r.ProcessedAt == nil || r.EventType != e.Type {
		t.Fatalf("row: %+v", r)
	}
}

func testInboxRollback(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	tx, _, rollback := h.Begin(t, s)
	if st, _, err := d.InboxAcquire(context.Background(), tx, "c1", e); err != nil || st != store.InboxFresh {
		t.Fatalf("acquire: %v %v", st, err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}
	if st, _ := acquire(t, h, s, d, "c1", e, txbox.StatusProcessed); st != store.InboxFresh {
		t.Fatalf("after a rolled-back attempt the delivery must count as first: %v", st)
	}
}

func testInboxFailRetry(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	e.Headers = map[string]string{"traceparent": "00-abc-def-01"}
	for i := 1; i <= 2; i++ {
		var attempts int
		var parked bool
		InTx(t, h, s, func(tx store.Tx) error {
			var err error
			attempts, parked, err = d.InboxFail(context.Background(), tx, "c1", e, "boom", 5, txbox.StatusRetry)
			return err
		})
		if attempts != i || parked {
			t.Fatalf("fail #%d: attempts %d parked %v", i, attempts, parked)
		}
	}
	r := row(t, a, "c1", e.ID)
	if r.Status != txbox.StatusRetry || r.RetryCount != 2 || r.ErrorMessage != "boom" {
		t.Fatalf("after two failures: %+v", r)
	}
	st, n := acquire(t, h, s, d, "c1", e, txbox.StatusProcessed)
	if st != store.InboxRetry || n != 2 {
		t.Fatalf("redelivery after failures: %v attempts %d", st, n)
	}
	r = row(t, a, "c1", e.ID)
	if r.Status != txbox.StatusProcessed || r.RetryCount != 2 || r.ErrorMessage != "boom" {
		t.Fatalf("processed row must keep the attempts and the last error: %+v", r)
	}
}

func testInboxParkReplay(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	ctx := context.Background()
	e := ev("a", 1)
	e.AggregateVersion = 4
	e.Headers = map[string]string{"traceparent": "00-abc-def-01"}
	for i := 1; i <= 3; i++ {
		var parked bool
		InTx(t, h, s, func(tx store.Tx) error {
			var err error
			_, parked, err = d.InboxFail(ctx, tx, "c1", e, "always", 3, txbox.StatusRetry)
			return err
		})
		if parked != (i == 3) {
			t.Fatalf("fail #%d: parked %v", i, parked)
		}
	}
	if st, _ := acquire(t, h, s, d, "c1", e, ""); st != store.InboxParked {
		t.Fatalf("delivery of a parked event: %v", st)
	}
	dead, err := a.InboxList(ctx, store.InboxFilter{Consumer: "c1", Status: txbox.StatusDead})
	if err != nil || len(dead) != 1 {
		t.Fatalf("list dead: %v %d", err, len(dead))
	}
	got := dead[0].Event
	if got.ID != e.ID || got.Type != e.Type || got.AggregateType != e.AggregateType || got.AggregateID != e.AggregateID ||
		got.AggregateVersion != 4 || string(got.Payload) != string(e.Payload) || got.Headers["traceparent"] != "00-abc-def-01" {
		t.Fatalf("parked event not kept whole for replay: %+v", got)
	}
	if n, err := a.InboxReplay(ctx, store.InboxFilter{Consumer: "other"}); err != nil || n != 0 {
		t.Fatalf("replay of another consumer: %d %v", n, err)
	}
	if n, err := a.InboxReplay(ctx, store.InboxFilter{Consumer: "c1", EventIDs: []string{e.ID}}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	r := row(t, a, "c1", e.ID)
	if r.Status != txbox.StatusReplay || r.RetryCount != 0 {
		t.Fatalf("replayed row: %+v", r)
	}
	// A replay that fails again goes back to REPLAY, not RETRY: no broker
	// message will bring it back.
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", e, "still", 3, txbox.StatusReplay)
		return err
	})
	if r := row(t, a, "c1", e.ID); r.Status != txbox.StatusReplay || r.RetryCount != 1 {
		t.Fatalf("failed replay: %+v", r)
	}
	if st, _ := acquire(t, h, s, d, "c1", e, txbox.StatusProcessed); st != store.InboxRetry {
		t.Fatalf("replay run: %v", st)
	}
	// Undecodable parked messages are kept but never replayed.
	junk := txbox.Event{ID: "raw-1", Type: store.UndecodableType, AggregateType: "unknown", AggregateID: "x", Payload: []byte(`{"body":"\\u00ff"}`)}
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", junk, "undecodable", 1, txbox.StatusRetry)
		return err
	})
	if n, err := a.InboxReplay(ctx, store.InboxFilter{Consumer: "c1"}); err != nil || n != 0 {
		t.Fatalf("undecodable row replayed: %d %v", n, err)
	}
}

func testInboxFailAfterProcessed(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	acquire(t, h, s, d, "c1", e, txbox.StatusProcessed)
	// A slow second delivery failed after the first one committed: its
	// failure must not reopen the processed row.
	var attempts int
	InTx(t, h, s, func(tx store.Tx) error {
		var err error
		attempts, _, err = d.InboxFail(context.Background(), tx, "c1", e, "late", 3, txbox.StatusRetry)
		return err
	})
	if r := row(t, a, "c1", e.ID); r.Status != txbox.StatusProcessed || attempts != 0 {
		t.Fatalf("processed row changed by a late failure: %+v (attempts %d)", r, attempts)
	}
}

func testInboxVersion(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	check := func(v int64) (int64, bool) {
		var last int64
		var ok bool
		InTx(t, h, s, func(tx store.Tx) error {
			var err error
			last, ok, err = d.InboxVersion(context.Background(), tx, "c1", "Order", "o-1", v)
			return err
		})
		return last, ok
	}
	if _, ok := check(5); !ok {
		t.Fatal("first version refused")
	}
	if last, ok := check(3); ok || last != 5 {
		t.Fatalf("v3 after v5: ok %v last %d", ok, last)
	}
	if last, ok := check(5); ok || last != 5 {
		t.Fatalf("v5 again: ok %v last %d", ok, last)
	}
	if _, ok := check(7); !ok {
		t.Fatal("v7 after v5 (a gap) must be applied")
	}
	// Rolled back: the version is not recorded.
	tx, _, rollback := h.Begin(t, s)
	if _, ok, err := d.InboxVersion(context.Background(), tx, "c1", "Order", "o-1", 9); err != nil || !ok {
		t.Fatal(err)
	}
	_ = rollback()
	if _, ok := check(8); !ok {
		t.Fatal("a rolled-back version must not count")
	}
	// Per consumer and per aggregate.
	var ok bool
	InTx(t, h, s, func(tx store.Tx) error {
		var err error
		_, ok, err = d.InboxVersion(context.Background(), tx, "c2", "Order", "o-1", 1)
		return err
	})
	if !ok {
		t.Fatal("versions leaked across consumers")
	}
	e := ev("a", 1)
	acquire(t, h, s, d, "c1", e, "")
	InTx(t, h, s, func(tx store.Tx) error {
		if _, _, err := d.InboxAcquire(context.Background(), tx, "c1", e); err != nil {
			return err
		}
		return d.InboxDone(context.Background(), tx, "c1", e.ID, txbox.StatusSkipped, "stale: version 3")
	})
	if r := row(t, a, "c1", e.ID); r.Status != txbox.StatusSkipped || r.ErrorMessage != "stale: version 3" {
		t.Fatalf("skipped row: %+v", r)
	}
	if st, _ := acquire(t, h, s, d, "c1", e, ""); st != store.InboxDuplicate {
		t.Fatalf("a skipped event redelivered: %v, want duplicate", st)
	}
}

func testInboxConsumers(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	for _, c := range []string{"inventory", "billing"} {
		if st, _ := acquire(t, h, s, d, c, e, txbox.StatusProcessed); st != store.InboxFresh {
			t.Fatalf("%s: %v", c, st)
		}
	}
	counts, err := a.InboxCounts(context.Background())
	if err != nil || counts["inventory"][txbox.StatusProcessed] != 1 || counts["billing"][txbox.StatusProcessed] != 1 {
		t.Fatalf("counts: %v %v", counts, err)
	}
}

func testInboxCleanup(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	ctx := context.Background()
	for i := range 9 {
		acquire(t, h, s, d, "c1", ev("a", i), txbox.StatusProcessed)
	}
	parked := ev("b", 1)
	InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := d.InboxFail(ctx, tx, "c1", parked, "x", 1, txbox.StatusRetry)
		return err
	})
	checkCleanup(t, cleanupFuncs{a.InboxCleanupBatch, func(ctx context.Context, age time.Duration, limit int) (int64, error) {
		return store.InboxCleanup(ctx, a, age, limit)
	}}, 9, 4)
	if rows, _ := a.InboxList(ctx, store.InboxFilter{Consumer: "c1"}); len(rows) != 1 || rows[0].Status != txbox.StatusDead {
		t.Fatalf("cleanup must keep parked rows: %+v", rows)
	}
}

// testInboxConcurrent delivers one event again while its first delivery is
// still in its transaction, as a broker does after its ack wait. The
// redeliveries wait for the first one and then see what it did: when it
// rolled back, the (single) waiter is the first delivery; when it committed,
// every waiter finds the event processed, without an error.
func testInboxConcurrent(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	ctx := ctxT(t)
	for _, c := range []struct {
		name    string
		waiters int
		commit  bool
		want    store.InboxState
	}{
		{"rollback", 1, false, store.InboxFresh},
		{"commit", 4, true, store.InboxDuplicate},
	} {
		e := ev("concurrent-"+c.name, 1)
		tx, commit, rollback := h.Begin(t, s)
		if st, _, err := d.InboxAcquire(ctx, tx, "c1", e); err != nil || st != store.InboxFresh {
			_ = rollback()
			t.Fatalf("%s: first delivery: %v %v", c.name, st, err)
		}
		type result struct {
			st  store.InboxState
			err error
		}
		results := make(chan result, c.waiters)
		for range c.waiters {
			go func() {
				wtx, wcommit, wrollback := h.Begin(t, s)
				st, _, err := d.InboxAcquire(ctx, wtx, "c1", e)
				if err == nil && (st == store.InboxFresh || st == store.InboxRetry) {
					err = d.InboxDone(ctx, wtx, "c1", e.ID, txbox.StatusProcessed, "")
				}
				if err == nil {
					err = wcommit()
				} else {
					_ = wrollback()
				}
				results <- result{st, err}
			}()
		}
		// Let the redeliveries queue up behind the first delivery. (One that
		// starts late sees the outcome directly: the expectations hold too.)
		time.Sleep(200 * time.Millisecond)
		if c.commit {
			if err := d.InboxDone(ctx, tx, "c1", e.ID, txbox.StatusProcessed, ""); err != nil {
				_ = rollback()
				t.Fatal(err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
		} else if err := rollback(); err != nil {
			t.Fatal(err)
		}
		var errs []error
		for range c.waiters {
			r := <-results
			if r.err != nil {
				errs = append(errs, r.err)
			} else if r.st != c.want {
				errs = append(errs, fmt.Errorf("redelivery: %v, want %v", r.st, c.want))
			}
		}
		if len(errs) > 0 {
			t.Fatalf("%s: %v", c.name, errs)
		}
		if r := row(t, a, "c1", e.ID); r.Status != txbox.StatusProcessed {
			t.Fatalf("%s: row %+v", c.name, r)
		}
	}
}
