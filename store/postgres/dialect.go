package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Dialect writes PostgreSQL SQL inside a caller's transaction. It works with
// pgx.Tx (wrapped by pgxtx.Wrap) and with *sql.Tx from the pgx stdlib driver
// (wrapped by store.SQLTx).
type Dialect struct {
	Tables store.Tables
}

func (Dialect) Name() string { return "postgres" }

// insertChunk keeps one INSERT well under PostgreSQL's 65535 parameters.
const insertChunk = 1000

// InsertEvents writes events in multi-row INSERTs. It checks the table names
// and builds the statement on every call; outbox.NewWriter does both once,
// through Prepare.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	p, err := d.prepare()
	if err != nil {
		return err
	}
	return p.InsertEvents(ctx, tx, events)
}

// Prepare validates the table names and builds the INSERT text once. The
// result is a Dialect with every method of d (Notify, the inbox SQL) whose
// InsertEvents only binds and executes.
func (d Dialect) Prepare() (store.Dialect, error) {
	p, err := d.prepare()
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (d Dialect) prepare() (*preparedDialect, error) {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &preparedDialect{Dialect: d, insert: store.NewPreparedInsert(t.Qualified(t.Outbox), store.EventColumns, insertChunk, ph)}, nil
}

// preparedDialect is a Dialect whose table names are validated and whose
// INSERT text is built.
type preparedDialect struct {
	Dialect
	insert *store.PreparedInsert
}

func (p *preparedDialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	err := p.insert.Exec(ctx, tx, len(events), func(i int, args []any) ([]any, error) {
		e := &events[i]
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, string(e.Payload),
			store.EncodeHeaders(e.Headers), e.OccurredAt.UTC()), nil
	})
	if err != nil {
		return fmt.Errorf("postgres: insert events: %w", err)
	}
	return nil
}

// errNoRowsSQL is database/sql's no-rows error, which a *sql.Tx from the
// pgx stdlib driver returns instead of pgx.ErrNoRows.
var errNoRowsSQL = sql.ErrNoRows
