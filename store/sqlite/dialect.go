package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

const insertCols = 9

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
	row := "(" + strings.Repeat("?, ", insertCols-1) + "?)"
	for len(events) > 0 {
		n := min(len(events), insertChunk)
		chunk := events[:n]
		events = events[n:]
		var b strings.Builder
		b.WriteString(`INSERT INTO ` + t.Outbox + ` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers, occurred_at, created_at) VALUES `)
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
			occurred := now
			if !e.OccurredAt.IsZero() {
				occurred = micros(e.OccurredAt)
			}
			payload := string(e.Payload)
			if len(e.Payload) == 0 {
				payload = "null"
			}
			args = append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload, headers, occurred, now)
		}
		if _, err := tx.Exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("sqlite: insert events: %w", err)
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
