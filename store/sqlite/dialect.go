package sqlite

import (
	"context"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinsert"
)

// Dialect writes SQLite SQL inside a caller's transaction (a *sql.Tx on a
// "sqlite" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "sqlite" }

// outboxInsert is the outbox INSERT: 1000 rows of 9 variables stay far
// under SQLite's limit of 32766 bound variables per statement. created_at
// is set here, with microsecond precision, from the host clock (which is
// the database's clock: SQLite runs in this process); SQL defaults have only
// milliseconds.
var outboxInsert = sqlinsert.New(sqlstore.OutboxInsert{
	Name: "sqlite", Chunk: 1000, Placeholder: sqlstore.QuestionMark,
	Columns: append(sqlstore.EventColumns[:len(sqlstore.EventColumns):len(sqlstore.EventColumns)], "created_at"),
	Table:   func(t store.Tables) (string, error) { return t.Outbox, noSchema(t) },
	Args: func(now time.Time, e *txbox.Event, args []any) []any {
		created := micros(now)
		occurred := created
		if !e.OccurredAt.IsZero() {
			occurred = micros(e.OccurredAt)
		}
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, sqlstore.JSONPayload(e),
			sqlstore.EncodeHeaders(e.Headers), occurred, created)
	},
})

// InsertEvents writes events in multi-row INSERTs, built once for d's
// table names.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	return outboxInsert.Insert(ctx, tx, d.Tables, events)
}

// Prepare checks the table names and builds the INSERT (store.Preparer);
// the result is d itself, so it keeps every method.
func (d Dialect) Prepare() (store.Dialect, error) { return outboxInsert.Prepare(d, d.Tables) }

// noSchema refuses a schema: SQLite has none (an attached database is not
// one the store manages).
func noSchema(t store.Tables) error {
	if t.Schema != "" {
		return &txbox.ConfigError{Field: "Tables.Schema", Reason: "SQLite store does not support a schema; leave it empty"}
	}
	return nil
}
