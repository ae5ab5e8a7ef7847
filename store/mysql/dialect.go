package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Dialect writes MySQL SQL inside a caller's transaction (a *sql.Tx on a
// "mysql" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "mysql" }

// insertChunk rows per INSERT: 8 placeholders a row stays far under the
// 65535 of a prepared statement, and the statement far under
// max_allowed_packet for ordinary payloads.
const insertChunk = 500

// InsertEvents writes events in multi-row INSERTs. created_at comes from the
// column default, UTC_TIMESTAMP(6): the database clock.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	now := time.Now()
	err := store.MultiInsert(ctx, tx, t.Qualified(t.Outbox), store.EventColumns, len(events), insertChunk,
		func(int) string { return "?" },
		func(i int) ([]any, error) {
			e := events[i]
			occurred := e.OccurredAt
			if occurred.IsZero() {
				occurred = now
			}
			payload := string(e.Payload)
			if len(e.Payload) == 0 {
				payload = "null"
			}
			return []any{e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload,
				store.EncodeHeaders(e.Headers), sqlTime(occurred)}, nil
		})
	if err != nil {
		return fmt.Errorf("mysql: insert events: %w", err)
	}
	return nil
}
