package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// OutboxInsert describes how one SQL dialect writes events into its outbox
// table. The three SQL stores differ only in what is here; checking the
// table names, building the statement once and running it are shared.
type OutboxInsert struct {
	Name  string // the dialect, for errors: "postgres: insert events: ..."
	Chunk int    // rows per INSERT, within the database's parameter limits
	// Columns of the INSERT, in the order Args appends values.
	Columns []string
	// Placeholder renders the n-th (1-based) placeholder.
	Placeholder func(n int) string
	// Table checks the (defaulted, validated) table names further and
	// returns the outbox table as the SQL names it. Nil: t.Qualified(t.Outbox).
	Table func(t store.Tables) (string, error)
	// Args appends the values of e to args; now is the one clock reading of
	// the call, for defaults.
	Args func(now time.Time, e *txbox.Event, args []any) []any
}

// Inserter is an OutboxInsert prepared for one set of table names.
type Inserter struct {
	spec   *OutboxInsert
	insert *PreparedInsert
}

// Tables returns t with its defaults, validated: a Dialect may be built by
// hand, and table names are pasted into SQL.
func Tables(t store.Tables) (store.Tables, error) {
	t = t.WithDefaults()
	return t, t.Validate()
}

// Prepare validates t and builds the INSERT text once.
func (o *OutboxInsert) Prepare(t store.Tables) (*Inserter, error) {
	t, err := Tables(t)
	if err != nil {
		return nil, err
	}
	table := t.Qualified(t.Outbox)
	if o.Table != nil {
		if table, err = o.Table(t); err != nil {
			return nil, err
		}
	}
	return &Inserter{spec: o, insert: NewPreparedInsert(table, o.Columns, o.Chunk, o.Placeholder)}, nil
}

// InsertEvents inserts events with prepared, or, when a dialect was used
// without Prepare (nil), prepares for t first.
func (o *OutboxInsert) InsertEvents(ctx context.Context, tx store.Tx, t store.Tables, prepared *Inserter, events []txbox.Event) error {
	if prepared == nil {
		var err error
		if prepared, err = o.Prepare(t); err != nil {
			return err
		}
	}
	return prepared.InsertEvents(ctx, tx, events)
}

// InsertEvents writes events in multi-row INSERTs of at most Chunk rows.
func (in *Inserter) InsertEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	now := time.Now()
	err := in.insert.Exec(ctx, tx, len(events), func(i int, args []any) ([]any, error) {
		return in.spec.Args(now, &events[i], args), nil
	})
	if err != nil {
		return fmt.Errorf("%s: insert events: %w", in.spec.Name, err)
	}
	return nil
}

// JSONPayload is the payload as the JSON columns keep it: "null" for none,
// since MySQL's and SQLite's JSON checks refuse an empty string.
func JSONPayload(e *txbox.Event) string {
	if len(e.Payload) == 0 {
		return "null"
	}
	return string(e.Payload)
}

// QuestionMark is the placeholder of MySQL and SQLite.
func QuestionMark(int) string { return "?" }
