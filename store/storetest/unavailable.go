package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// testInboxUnavailable: the store's dialect recognises its own database's
// errors that mean an outage (store.OutageClassifier), so that the inbox
// spends no attempt on a handler that fails with one: a connection lost
// under a transaction and a write refused because the database is
// read-only, taken from the store's real database. A constraint violation,
// a bare EOF (a handler's truncated payload) and a deadline are the
// event's or the caller's, and are not outages; an error wrapped with
// txbox.DatabaseUnavailable always is.
func testInboxUnavailable(t *testing.T, h Harness, d store.InboxDialect, _ store.InboxAdmin, s store.Store) {
	c, ok := d.(store.OutageClassifier)
	if !ok {
		t.Fatalf("%T does not implement store.OutageClassifier", d)
	}
	ctx := ctxT(t)
	name := d.Name()
	recognised := func(what string, err error, want bool) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if got := c.IsUnavailable(err); got != want {
			t.Errorf("%s: IsUnavailable = %v, want %v (%T: %v)", what, got, want, err, err)
		}
		if got := store.IsOutage(d, err); got != want {
			t.Errorf("%s: store.IsOutage = %v, want %v", what, got, want)
		}
	}

	// A connection lost under a transaction: the session ended by the
	// server (as an administrator or a failover tool ends it), then the
	// next statement on the dead connection. SQLite has no connection to
	// lose.
	if name != "sqlite" {
		kill := map[string]string{"postgres": "SELECT pg_terminate_backend(pg_backend_pid())", "mysql": "KILL CONNECTION CONNECTION_ID()"}[name]
		if kill == "" {
			t.Fatalf("no way to end a session on %s", name)
		}
		tx, _, rollback := h.Begin(t, s)
		_, kerr := tx.Exec(ctx, kill)
		if name == "postgres" { // 57P01; MySQL and MariaDB differ in what the killed statement returns
			recognised("the session terminated under the statement", kerr, true)
		}
		_, err := tx.Exec(ctx, "SELECT 1")
		recognised("a statement on the connection that was killed", err, true)
		_ = rollback()
	}

	// A write refused because the transaction (or connection) is read-only,
	// which is what a hot standby or a demoted primary answers.
	readOnly := map[string][2]string{
		"postgres": {"SET TRANSACTION READ ONLY", ""},
		// START TRANSACTION commits the open one and begins a read-only
		// one on the same connection.
		"mysql":  {"START TRANSACTION READ ONLY", ""},
		"sqlite": {"PRAGMA query_only = ON", "PRAGMA query_only = OFF"},
	}[name]
	if readOnly[0] == "" {
		t.Fatalf("no way to make a transaction read-only on %s", name)
	}
	tx, _, rollback := h.Begin(t, s)
	if _, err := tx.Exec(ctx, readOnly[0]); err != nil {
		_ = rollback()
		t.Fatalf("%s: %v", readOnly[0], err)
	}
	err := d.InsertEvents(ctx, tx, []txbox.Event{ev("ro", 1)})
	if readOnly[1] != "" {
		if _, rerr := tx.Exec(ctx, readOnly[1]); rerr != nil {
			t.Errorf("%s: %v", readOnly[1], rerr)
		}
	}
	_ = rollback()
	recognised("a write in a read-only transaction", err, true)

	// The event's own fault: a duplicate key.
	tx, _, rollback = h.Begin(t, s)
	e := ev("dup", 1)
	err = d.InsertEvents(ctx, tx, []txbox.Event{e, e})
	_ = rollback()
	recognised("a duplicate key", err, false)

	for what, err := range map[string]error{
		"a bare EOF":            fmt.Errorf("decoding the payload: %w", io.ErrUnexpectedEOF),
		"the caller's deadline": fmt.Errorf("handler: %w", context.DeadlineExceeded),
		"a plain error":         errors.New("unknown sku"),
	} {
		recognised(what, err, false)
	}
	if !store.IsOutage(d, txbox.DatabaseUnavailable(errors.New("downstream down"))) {
		t.Error("store.IsOutage does not take an error wrapped with txbox.DatabaseUnavailable")
	}
}
