package sqlite

import (
	"context"
	"fmt"
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

// InsertEvents writes events in multi-row INSERTs. created_at is set here,
// with microsecond precision, from the host clock (which is the database's
// clock: SQLite runs in this process); SQL defaults have only milliseconds.
// It checks the table names and builds the statement on every call;
// outbox.NewWriter does both once, through Prepare.
func (d Dialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	p, err := d.prepare()
	if err != nil {
		return err
	}
	return p.InsertEvents(ctx, tx, events)
}

// Prepare validates the table names and builds the INSERT text once. The
// result is a Dialect with every method of d whose InsertEvents only binds
// and executes.
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
	if t.Schema != "" {
		return nil, &txbox.ConfigError{Field: "Tables.Schema", Reason: "SQLite store does not support a schema; leave it empty"}
	}
	cols := append(store.EventColumns[:len(store.EventColumns):len(store.EventColumns)], "created_at")
	return &preparedDialect{Dialect: d, insert: store.NewPreparedInsert(t.Outbox, cols, insertChunk, func(int) string { return "?" })}, nil
}

// preparedDialect is a Dialect whose table names are validated and whose
// INSERT text is built.
type preparedDialect struct {
	Dialect
	insert *store.PreparedInsert
}

func (p *preparedDialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	now := micros(time.Now())
	err := p.insert.Exec(ctx, tx, len(events), func(i int, args []any) ([]any, error) {
		e := &events[i]
		occurred := now
		if !e.OccurredAt.IsZero() {
			occurred = micros(e.OccurredAt)
		}
		payload := string(e.Payload)
		if len(e.Payload) == 0 {
			payload = "null"
		}
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload,
			store.EncodeHeaders(e.Headers), occurred, now), nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: insert events: %w", err)
	}
	return nil
}
