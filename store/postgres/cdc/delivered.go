package cdc

import (
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// deliveredSet collects a step's outcome for Store.RecordDelivered.
type deliveredSet struct {
	cdcstore.Delivered
}

// dead records a change that will never be published: a row is marked DEAD,
// a tableless event is stored as a DEAD row, both with the reason.
func (d *deliveredSet) dead(c change, reason string) {
	if c.message {
		rec := c.rec
		rec.LastError = reason
		d.DeadMessages = append(d.DeadMessages, rec)
		return
	}
	d.DeadRows = append(d.DeadRows, store.Failure{ID: c.rec.ID, Dead: true, Error: reason})
}

// held records a change held behind a DEAD event of its aggregate (the
// relay's hold mark f): a row is marked so, a tableless event is stored
// as a held row.
func (d *deliveredSet) held(c change, f store.Failure) {
	if c.message {
		rec := c.rec
		rec.LastError = f.Error
		d.HeldMessages = append(d.HeldMessages, rec)
		return
	}
	d.Held = append(d.Held, f)
}

func (d *deliveredSet) events() int {
	return len(d.Sent) + len(d.DeadRows) + len(d.DeadMessages) + len(d.Held) + len(d.HeldMessages)
}
