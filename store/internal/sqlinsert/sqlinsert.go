// Package sqlinsert is the outbox INSERT of a SQL dialect (the statement
// is sqlstore's), built once per set of table names. A Dialect is a value
// that callers build by hand and insert with on every transaction, or
// prepare once (store.Preparer): either way the names are checked and the
// statement built on the first use only.
package sqlinsert

import (
	"context"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// Outbox is one dialect's outbox INSERT.
type Outbox struct {
	spec  sqlstore.OutboxInsert
	built sqltemplate.Cache[store.Tables, *sqlstore.Inserter]
}

// New returns the INSERT spec describes.
func New(spec sqlstore.OutboxInsert) *Outbox {
	o := &Outbox{spec: spec}
	o.built.Build = o.spec.Prepare
	return o
}

// Insert writes events into the outbox table of t in multi-row INSERTs.
func (o *Outbox) Insert(ctx context.Context, tx store.Tx, t store.Tables, events []txbox.Event) error {
	in, err := o.built.Get(t)
	if err != nil {
		return err
	}
	return in.InsertEvents(ctx, tx, events)
}

// Prepare is store.Preparer's Prepare for d, a dialect on the tables t: it
// checks the names and builds the INSERT, and returns d itself, so the
// result keeps every method of d.
func (o *Outbox) Prepare(d store.Dialect, t store.Tables) (store.Dialect, error) {
	if _, err := o.built.Get(t); err != nil {
		return nil, err
	}
	return d, nil
}
