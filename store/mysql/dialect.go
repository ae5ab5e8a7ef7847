package mysql

import (
	"context"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinsert"
)

// Dialect writes MySQL SQL inside a caller's transaction (a *sql.Tx on a
// "mysql" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "mysql" }

// outboxInsert is the outbox INSERT. 500 rows per INSERT: 8 placeholders
// a row stays far under the 65535 of a prepared statement, and the
// statement far under max_allowed_packet for ordinary payloads. created_at
// comes from the column default, UTC_TIMESTAMP(6): the database clock.
var outboxInsert = sqlinsert.New(sqlstore.OutboxInsert{
	Name: "mysql", Chunk: 500, Columns: sqlstore.EventColumns, Placeholder: sqlstore.QuestionMark,
	Args: func(now time.Time, e *txbox.Event, args []any) []any {
		occurred := e.OccurredAt
		if occurred.IsZero() {
			occurred = now
		}
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, sqlstore.JSONPayload(e),
			sqlstore.EncodeHeaders(e.Headers), sqlTime(occurred))
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
