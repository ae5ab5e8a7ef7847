package postgres

import (
	"context"
	"database/sql"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinsert"
)

// Dialect writes PostgreSQL SQL inside a caller's transaction. It works with
// pgx.Tx (wrapped by pgxtx.Wrap) and with *sql.Tx from the pgx stdlib driver
// (wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "postgres" }

// outboxInsert is the outbox INSERT: chunks of 1000 rows keep one INSERT
// well under PostgreSQL's 65535 parameters.
var outboxInsert = sqlinsert.New(sqlstore.OutboxInsert{
	Name: "postgres", Chunk: 1000, Columns: sqlstore.EventColumns, Placeholder: ph,
	Args: func(_ time.Time, e *txbox.Event, args []any) []any {
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, string(e.Payload),
			sqlstore.EncodeHeaders(e.Headers), e.OccurredAt.UTC())
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

// errNoRowsSQL is database/sql's no-rows error, which a *sql.Tx from the
// pgx stdlib driver returns instead of pgx.ErrNoRows.
var errNoRowsSQL = sql.ErrNoRows
