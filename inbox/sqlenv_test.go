package inbox_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/storetest"
)

// The harness of the inbox tests that run on every store through
// database/sql: the store and its *sql.DB, its inbox with *sql.Tx
// transactions, and deliveries and subscribers the tests control.

// harness is a store of one dialect for the inbox, on fresh tables.
type harness interface {
	storetest.Harness
	SQLDB(t *testing.T, s store.Store) *sql.DB
}

// openInboxStore returns a migrated store of h's on fresh tables and its
// *sql.DB.
func openInboxStore(t *testing.T, h harness) (store.Store, *sql.DB) {
	t.Helper()
	s := storeenv.Migrated(t, h.Open(t))
	return s, h.SQLDB(t, s)
}

// sqlInbox is s's inbox through db: handlers get a *sql.Tx, whatever the
// store (the PostgreSQL one through pgx's stdlib driver).
func sqlInbox(t *testing.T, s store.Store, db *sql.DB) store.InboxStore[*sql.Tx] {
	t.Helper()
	is, err := store.SQLInbox(db, s.(interface {
		store.Store
		store.InboxAdmin
		InboxDialect() store.InboxDialect
	}))
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// storeOrSQL is the store itself when it begins *sql.Tx inbox transactions
// (MySQL, SQLite), else the store through database/sql (PostgreSQL).
func storeOrSQL(t *testing.T, s store.Store, db *sql.DB) store.InboxStore[*sql.Tx] {
	if is, ok := s.(store.InboxStore[*sql.Tx]); ok {
		return is
	}
	return sqlInbox(t, s, db)
}

// quiet is a logger that drops every line.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// counting counts deliveries, to tell a parked message from one that keeps
// coming back.
type counting struct {
	broker.Subscriber
	n atomic.Int64
}

func (c *counting) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	ds, err := c.Subscriber.Receive(ctx, max)
	c.n.Add(int64(len(ds)))
	return ds, err
}

// fake is a delivery with a broker message id of the test's choosing.
type fake struct {
	ev      txbox.Event
	err     error
	raw     broker.RawMessage
	ackErr  error
	acked   bool
	nakedIn time.Duration
	settled int
}

func (f *fake) Event() (txbox.Event, error) { return f.ev, f.err }
func (f *fake) Raw() broker.RawMessage      { return f.raw }
func (f *fake) Attempt() int                { return 1 }
func (f *fake) Ack(context.Context) error {
	f.settled++
	f.acked = f.ackErr == nil
	return f.ackErr
}
func (f *fake) Nak(_ context.Context, d time.Duration) error {
	f.settled++
	f.nakedIn = d
	return nil
}
