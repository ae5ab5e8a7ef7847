// Package outbox is the write side: it adds events to the outbox table inside
// the caller's own transaction, so they commit or roll back with the business
// change. It opens no connection and starts no transaction of its own.
package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// Writer adds events through one dialect. It is safe for concurrent use.
type Writer struct {
	d store.Dialect
}

// NewWriter returns a writer for d, e.g. postgres.Dialect{} or the
// dialect of an opened store (store.Dialect()).
func NewWriter(d store.Dialect) *Writer { return &Writer{d: d} }

// Add writes events in one multi-row INSERT on tx. Missing ids and
// occurred-at times are filled in here, once, so a retry of the same Event
// value never produces a second id.
func (w *Writer) Add(ctx context.Context, tx store.Tx, events ...txbox.Event) error {
	if len(events) == 0 {
		return nil
	}
	prepared := make([]txbox.Event, len(events))
	now := time.Now().UTC()
	for i, e := range events {
		if e.ID == "" {
			e.ID = txbox.NewID()
		}
		if e.OccurredAt.IsZero() {
			e.OccurredAt = now
		}
		if len(e.Payload) == 0 {
			e.Payload = []byte("null")
		}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("outbox: event %d: %w", i, err)
		}
		prepared[i] = e
	}
	return w.d.InsertEvents(ctx, tx, prepared)
}

// AddSQL is Add for a database/sql transaction.
func (w *Writer) AddSQL(ctx context.Context, tx *sql.Tx, events ...txbox.Event) error {
	return w.Add(ctx, store.SQLTx(tx), events...)
}

// AddPgx is Add for a pgx transaction.
func (w *Writer) AddPgx(ctx context.Context, tx pgx.Tx, events ...txbox.Event) error {
	return w.Add(ctx, postgres.Tx(tx), events...)
}
