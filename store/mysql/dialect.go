package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

const insertCols = 8

// InsertEvents writes events in multi-row INSERTs. created_at comes from the
// column default, UTC_TIMESTAMP(6): the database clock.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	table := t.Qualified(t.Outbox)
	row := "(" + strings.Repeat("?, ", insertCols-1) + "?)"
	now := time.Now()
	for len(events) > 0 {
		n := min(len(events), insertChunk)
		chunk := events[:n]
		events = events[n:]
		var b strings.Builder
		b.WriteString(`INSERT INTO ` + table + ` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers, occurred_at) VALUES `)
		args := make([]any, 0, n*insertCols)
		for i, e := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
			headers, err := headersJSON(e.Headers)
			if err != nil {
				return err
			}
			occurred := e.OccurredAt
			if occurred.IsZero() {
				occurred = now
			}
			payload := string(e.Payload)
			if len(e.Payload) == 0 {
				payload = "null"
			}
			args = append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload, headers, sqlTime(occurred))
		}
		if _, err := tx.Exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("mysql: insert events: %w", err)
		}
	}
	return nil
}

// headersJSON encodes headers for the headers column; nil when empty.
func headersJSON(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
