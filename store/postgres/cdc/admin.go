package cdc

import (
	"context"

	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// The operator's side of CDC (`txbox migrate --cdc`, `txbox cdc`, `txbox
// stats`): the database's preparation and the relays' slots.

// ErrWALLevel is returned by Migrate and Check when wal_level is not
// logical.
var ErrWALLevel = cdcstore.ErrWALLevel

// ErrSlotActive is returned by DropSlot while a relay reads the slot.
var ErrSlotActive = cdcstore.ErrSlotActive

// Migrate prepares the database for CDC relays: it checks wal_level, then
// creates the publication on the outbox table (inserts, and updates so a
// replayed DEAD row is delivered again) and the registry of slots. It is
// idempotent.
func Migrate(ctx context.Context, st *postgres.Store) error { return cdcstore.For(st).MigrateCDC(ctx) }

// Check reports whether Migrate ran: a clear error, naming the command to
// run, instead of a replication error later.
func Check(ctx context.Context, st *postgres.Store) error { return cdcstore.For(st).CheckCDC(ctx) }

// Publication is the name of the publication a CDC relay subscribes to:
// "<outbox>_cdc".
func Publication(st *postgres.Store) string { return cdcstore.For(st).Publication() }

// CreateSlot creates a logical replication slot for the pgoutput plugin
// and registers it; it reports false when the slot exists. With backfill
// the relay that first reads the slot also delivers the rows older than
// it from the table; without, it reads every event from the log, which is
// right only while the outbox holds nothing older to deliver.
func CreateSlot(ctx context.Context, st *postgres.Store, slot string, backfill bool) (bool, error) {
	s := cdcstore.For(st)
	created, err := s.CreateSlot(ctx, slot)
	if err != nil || backfill {
		return created, err
	}
	return created, s.RegisterSlot(ctx, slot, true, 0)
}

// SlotExists reports whether PostgreSQL has the slot.
func SlotExists(ctx context.Context, st *postgres.Store, slot string) (bool, error) {
	return cdcstore.For(st).SlotExists(ctx, slot)
}

// DropSlot drops a replication slot and forgets it. It refuses an active
// slot (ErrSlotActive); a slot that does not exist is only removed from
// the registry.
func DropSlot(ctx context.Context, st *postgres.Store, slot string) error {
	return cdcstore.For(st).DropSlot(ctx, slot)
}

// SlotLag is how far a CDC relay's slot is behind the database's log.
type SlotLag struct {
	Slot   string `json:"slot"`
	Exists bool   `json:"exists"` // false: registered but dropped
	Active bool   `json:"active"` // a relay reads it now
	// Bytes of log the slot holds that its reader has not confirmed.
	Bytes int64 `json:"lag_bytes"`
	// Seconds since the slot's reader last confirmed a position, while it
	// holds any log; 0 when caught up.
	Seconds float64 `json:"lag_seconds"`
}

// SlotLags reports every registered slot; none when Migrate never ran.
func SlotLags(ctx context.Context, st *postgres.Store) ([]SlotLag, error) {
	return slotLags(ctx, cdcstore.For(st))
}

func slotLags(ctx context.Context, s cdcstore.Store) ([]SlotLag, error) {
	rows, err := s.SlotLagRows(ctx)
	if err != nil || rows == nil {
		return nil, err
	}
	defer rows.Close()
	var out []SlotLag
	for rows.Next() {
		var l SlotLag
		if err := rows.Scan(&l.Slot, &l.Exists, &l.Active, &l.Bytes, &l.Seconds); err != nil {
			return nil, err
		}
		if l.Bytes <= 0 {
			l.Bytes, l.Seconds = 0, 0
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
