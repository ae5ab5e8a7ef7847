package mysql

import (
	"context"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Dialect writes MySQL SQL inside a caller's transaction (a *sql.Tx on a
// "mysql" pool, wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables

	prepared *sqlstore.Inserter // set by Prepare
}

func (Dialect) Name() string { return "mysql" }

// outboxInsert is the outbox INSERT. 500 rows per INSERT: 8 placeholders
// a row stays far under the 65535 of a prepared statement, and the
// statement far under max_allowed_packet for ordinary payloads. created_at
// comes from the column default, UTC_TIMESTAMP(6): the database clock.
var outboxInsert = sqlstore.OutboxInsert{
	Name: "mysql", Chunk: 500, Columns: sqlstore.EventColumns, Placeholder: sqlstore.QuestionMark,
	Args: func(now time.Time, e *txbox.Event, args []any) []any {
		occurred := e.OccurredAt
		if occurred.IsZero() {
			occurred = now
		}
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, sqlstore.JSONPayload(e),
			sqlstore.EncodeHeaders(e.Headers), sqlTime(occurred))
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
