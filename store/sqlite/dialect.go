package sqlite

import (
	"context"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Dialect writes SQLite SQL inside a caller's transaction (a *sql.Tx on a
// "sqlite" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables

	prepared *sqlstore.Inserter // set by Prepare
}

func (Dialect) Name() string { return "sqlite" }

// outboxInsert is the outbox INSERT: 1000 rows of 9 variables stay far
// under SQLite's limit of 32766 bound variables per statement. created_at
// is set here, with microsecond precision, from the host clock (which is
// the database's clock: SQLite runs in this process); SQL defaults have only
// milliseconds.
var outboxInsert = sqlstore.OutboxInsert{
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
}

// InsertEvents writes events in multi-row INSERTs. Unless d came from
// Prepare, it checks the table names and builds the statement on every call;
// outbox.NewWriter prepares once.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	return outboxInsert.InsertEvents(ctx, tx, d.Tables, d.prepared, events)
}

// Prepare validates the table names and builds the INSERT text once. The
// result is d itself, so it keeps every method (the inbox SQL); its
// InsertEvents only binds and executes.
func (d Dialect) Prepare() (store.Dialect, error) {
	in, err := outboxInsert.Prepare(d.Tables)
	if err != nil {
		return nil, err
	}
	d.prepared = in
	return d, nil
}

// noSchema refuses a schema: SQLite has none (an attached database is not
// one the store manages).
func noSchema(t store.Tables) error {
	if t.Schema != "" {
		return &txbox.ConfigError{Field: "Tables.Schema", Reason: "SQLite store does not support a schema; leave it empty"}
	}
	return nil
}
