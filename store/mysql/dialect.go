package mysql

import (
	"context"
	"fmt"
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

// InsertEvents writes events in multi-row INSERTs. created_at comes from the
// column default, UTC_TIMESTAMP(6): the database clock. It checks the table
// names and builds the statement on every call; outbox.NewWriter does both
// once, through Prepare.
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
	return &preparedDialect{Dialect: d, insert: store.NewPreparedInsert(t.Qualified(t.Outbox), store.EventColumns, insertChunk,
		func(int) string { return "?" })}, nil
}

// preparedDialect is a Dialect whose table names are validated and whose
// INSERT text is built.
type preparedDialect struct {
	Dialect
	insert *store.PreparedInsert
}

func (p *preparedDialect) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	now := time.Now()
	err := p.insert.Exec(ctx, tx, len(events), func(i int, args []any) ([]any, error) {
		e := &events[i]
		occurred := e.OccurredAt
		if occurred.IsZero() {
			occurred = now
		}
		payload := string(e.Payload)
		if len(e.Payload) == 0 {
			payload = "null"
		}
		return append(args, e.ID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.Type, payload,
			store.EncodeHeaders(e.Headers), sqlTime(occurred)), nil
	})
	if err != nil {
		return fmt.Errorf("mysql: insert events: %w", err)
	}
	return nil
}
