// Package cdcstore is the database side of change data capture as package
// store/postgres gives it to the CDC relay (store/postgres/cdc): the
// publication, the registry of slots, the backfill of rows older than a
// slot and the bookkeeping of delivered events. It is internal so that
// none of it is part of the store's public API; package cdc offers the
// operator's part (migrate, check, create and drop slots, their lag).
package cdcstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// Store is the CDC side of a *postgres.Store.
type Store interface {
	// Publication is the name of the publication a CDC relay subscribes
	// to: "<outbox>_cdc".
	Publication() string
	// MigrateCDC checks wal_level, then creates the publication on the
	// outbox table and the registry of slots. It is idempotent.
	MigrateCDC(ctx context.Context) error
	// CheckCDC reports whether MigrateCDC ran: a clear error, naming the
	// command to run, instead of a replication error later.
	CheckCDC(ctx context.Context) error
	// CreateSlot creates a logical replication slot for pgoutput and
	// registers it; it reports false when the slot exists.
	CreateSlot(ctx context.Context, slot string) (bool, error)
	// SlotExists reports whether PostgreSQL has the slot.
	SlotExists(ctx context.Context, slot string) (bool, error)
	// DropSlot drops a replication slot and forgets it; it refuses an
	// active slot (ErrSlotActive).
	DropSlot(ctx context.Context, slot string) error
	// SlotLagRows reads every registered slot: its name, whether it
	// exists and is active, the bytes of log it holds unconfirmed and the
	// seconds since its reader last confirmed (package cdc's SlotLag). It
	// returns nil rows when MigrateCDC never ran.
	SlotLagRows(ctx context.Context) (pgx.Rows, error)
	// RegisterSlot records a slot as a CDC relay's; backfilled says the
	// rows older than the slot are delivered, up to id maxID.
	RegisterSlot(ctx context.Context, slot string, backfilled bool, maxID int64) error
	// SlotBackfill reads how far the rows older than the slot were
	// delivered.
	SlotBackfill(ctx context.Context, slot string) (Backfill, error)
	// LockBackfill makes one relay at a time deliver the rows older than a
	// slot.
	LockBackfill(ctx context.Context, slot string) (unlock func(), err error)
	// PendingRows reads up to limit undelivered rows with ids above
	// afterID, in id order.
	PendingRows(ctx context.Context, afterID int64, limit int) ([]store.Record, error)
	// StillPending returns which of ids are PENDING rows of the outbox.
	StillPending(ctx context.Context, ids []int64) (map[int64]bool, error)
	// RowByID reads one outbox row.
	RowByID(ctx context.Context, id int64) (store.Record, bool, error)
	// WaitVisible waits until the transactions xids (32-bit, as the log
	// names them) are visible to new snapshots.
	WaitVisible(ctx context.Context, xids []uint32) error
	// RecordDelivered archives the delivered rows, marks and stores the
	// dead ones and notes the slot's position, in one transaction.
	RecordDelivered(ctx context.Context, d Delivered) error
}

// For returns the CDC side of st, a *postgres.Store. Package postgres sets
// it: this package cannot name the store's type without an import cycle.
var For func(st any) Store

// ErrWALLevel is returned by MigrateCDC and CheckCDC when wal_level is not
// logical.
var ErrWALLevel = errors.New("wal_level must be logical for CDC: run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL")

// ErrSlotActive is returned by DropSlot while a relay reads the slot.
var ErrSlotActive = errors.New("replication slot is active: stop its relay first")

// Delivered is what a CDC relay records after the broker confirmed a run of
// the stream, before it confirms the log position.
type Delivered struct {
	Sent         []int64         // rows to archive (or delete with DeleteSent)
	DeadRows     []store.Failure // rows to mark DEAD
	DeadMessages []store.Record  // tableless events to store as DEAD rows (LastError set)
	Held         []store.Failure // rows held behind a DEAD event (store.DeadBlocker)
	HeldMessages []store.Record  // tableless events to store as held rows (LastError set)
	Slot         string
	LSN          string // the position about to be confirmed, for the registry
}

// Backfill is how far a CDC relay delivered the rows older than its slot.
type Backfill struct {
	Done   bool
	MaxID  int64  // the highest id it took from the table
	EndLSN uint64 // the log position when it ended (0: not done)
}
