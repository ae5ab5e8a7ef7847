package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Dialect writes PostgreSQL SQL inside a caller's transaction. It works with
// pgx.Tx (wrapped by Tx) and with *sql.Tx from the pgx stdlib driver
// (wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "postgres" }

// insertChunk keeps one INSERT well under PostgreSQL's 65535 parameters.
const insertChunk = 1000

const insertCols = 8

// InsertEvents writes events in multi-row INSERTs.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	table := t.Qualified(t.Outbox)
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
			p := i * insertCols
			fmt.Fprintf(&b, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+8)
			headers, err := HeadersJSON(e.Headers)
			if err != nil {
				return err
			}
			args = append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, string(e.Payload), headers, e.OccurredAt.UTC())
		}
		if _, err := tx.Exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("postgres: insert events: %w", err)
		}
	}
	return nil
}

// HeadersJSON encodes headers for the headers column; nil when empty.
func HeadersJSON(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// Tx adapts a pgx transaction (or pool, or conn) to store.Tx.
func Tx(tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) store.Tx {
	return pgxTx{tx}
}

type pgxTx struct {
	tx interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (t pgxTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgxTx) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return t.tx.QueryRow(ctx, q, args...)
}

// errNoRowsSQL is database/sql's no-rows error, which a *sql.Tx from the
// pgx stdlib driver returns instead of pgx.ErrNoRows.
var errNoRowsSQL = sql.ErrNoRows
