package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Dialect writes SQLite SQL inside a caller's transaction (a *sql.Tx on a
// "sqlite" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "sqlite" }

// insertChunk rows per INSERT: 9 variables a row stays far under SQLite's
// limit of 32766 bound variables per statement.
const insertChunk = 1000

// InsertEvents writes events in multi-row INSERTs. created_at is set here,
// with microsecond precision, from the host clock (which is the database's
// clock: SQLite runs in this process); SQL defaults have only milliseconds.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	if t.Schema != "" {
		return &txbox.ConfigError{Field: "Tables.Schema", Reason: "SQLite store does not support a schema; leave it empty"}
	}
	now := micros(time.Now())
	err := store.MultiInsert(ctx, tx, t.Outbox, append(store.EventColumns[:len(store.EventColumns):len(store.EventColumns)], "created_at"),
		len(events), insertChunk, func(int) string { return "?" },
		func(i int) ([]any, error) {
			e := events[i]
			occurred := now
			if !e.OccurredAt.IsZero() {
				occurred = micros(e.OccurredAt)
			}
			payload := string(e.Payload)
			if len(e.Payload) == 0 {
				payload = "null"
			}
			return []any{e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload,
				store.EncodeHeaders(e.Headers), occurred, now}, nil
		})
	if err != nil {
		return fmt.Errorf("sqlite: insert events: %w", err)
	}
	return nil
}
