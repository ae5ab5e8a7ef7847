package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// cdcSide is the store's CDC side (cdcstore.Store), reached through
// cdcstore.For so that none of it is in the store's public API.
type cdcSide struct{ *Store }

func init() { cdcstore.For = func(st any) cdcstore.Store { return cdcSide{st.(*Store)} } }

// This file is the database side of change data capture (package
// store/postgres/cdc reads the log): the publication, the registry of the
// relays' slots, the lag of those slots, and the bookkeeping of delivered
// events. Every statement of it runs on the store's ordinary pool; each is
// a file of queries/ (statements in queries.go).

// Publication is the name of the publication a CDC relay subscribes to:
// "<outbox>_cdc".
func (s cdcSide) Publication() string { return s.tables.Outbox + "_cdc" }

// slotsTable is the registry of the slots CDC relays created, so stats and
// metrics report txbox's slots and no one else's.
func (s cdcSide) slotsTable() string { return s.st.args.Slots }

// MigrateCDC prepares the database for CDC relays: it checks wal_level,
// then creates the publication on the outbox table (inserts, and updates
// so a replayed DEAD row is delivered again) and the registry of slots. It
// is idempotent.
func (s cdcSide) MigrateCDC(ctx context.Context) error {
	if err := s.checkWALLevel(ctx); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.st.advisoryXactLock, "txbox-migrate-cdc:"+s.Publication()); err != nil {
			return fmt.Errorf("migrate cdc: lock: %w", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, s.st.publicationExists, s.Publication()).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, s.st.createPublication); err != nil {
				return fmt.Errorf("migrate cdc: publication: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, s.st.slotsTable); err != nil {
			return fmt.Errorf("migrate cdc: slots table: %w", err)
		}
		return nil
	})
}

// checkWALLevel returns cdcstore.ErrWALLevel unless wal_level is logical.
func (s cdcSide) checkWALLevel(ctx context.Context) error {
	var level string
	if err := s.pool.QueryRow(ctx, s.st.walLevel).Scan(&level); err != nil {
		return fmt.Errorf("postgres: wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("%w (it is %s)", cdcstore.ErrWALLevel, level)
	}
	return nil
}

// CheckCDC reports whether MigrateCDC ran: a clear error, naming the
// command to run, instead of a replication error later.
func (s cdcSide) CheckCDC(ctx context.Context) error {
	if err := s.checkWALLevel(ctx); err != nil {
		return err
	}
	var pub, reg bool
	err := s.pool.QueryRow(ctx, s.st.cdcReady, s.Publication(), s.slotsTable()).Scan(&pub, &reg)
	if err != nil {
		return fmt.Errorf("postgres: check cdc: %w", err)
	}
	if !pub || !reg {
		return &txbox.ConfigError{Field: "--mode (TXBOX_MODE)", Reason: "cdc: publication " + s.Publication() + " missing: run `txbox migrate --cdc` first"}
	}
	return nil
}

// RegisterSlot records a slot as a CDC relay's, for stats and metrics;
// backfilled says the rows older than the slot are delivered, up to id
// maxID.
func (s cdcSide) RegisterSlot(ctx context.Context, slot string, backfilled bool, maxID int64) error {
	_, err := s.pool.Exec(ctx, s.st.registerSlot, slot, backfilled, maxID)
	if err != nil {
		return fmt.Errorf("postgres: register slot: %w", err)
	}
	return nil
}

// RecordDelivered archives the delivered rows, marks and stores the dead
// ones and notes the slot's position, in one transaction: if it fails
// nothing is recorded, the position is not confirmed, and the events come
// again from the slot (their ids unchanged).
func (s cdcSide) RecordDelivered(ctx context.Context, d cdcstore.Delivered) error {
	b := &pgx.Batch{}
	if len(d.Sent) > 0 {
		b.Queue(s.q.txSent, d.Sent)
	}
	if len(d.DeadRows) > 0 {
		b.Queue(s.q.txFailed, failureArgs(d.DeadRows)...)
	}
	if len(d.Held) > 0 {
		b.Queue(s.q.txFailed, failureArgs(d.Held)...)
	}
	message := func(stmt string, r store.Record, more ...any) {
		b.Queue(stmt, append([]any{r.ID, sqlstore.Truncate(r.EventID, 64), sqlstore.Truncate(r.AggregateType, 64), sqlstore.Truncate(r.AggregateID, 128),
			r.AggregateVersion, sqlstore.Truncate(r.EventType, 128), jsonOrString(r.Payload), nullJSON(r.Headers),
			orNow(r.OccurredAt), orNow(r.CreatedAt), sqlstore.Truncate(r.LastError, 2000)}, more...)...)
	}
	for _, r := range d.DeadMessages {
		message(s.st.deadMessage, r)
	}
	for _, r := range d.HeldMessages {
		message(s.st.heldMessage, r, store.HoldFor.Milliseconds())
	}
	if d.Slot != "" && d.LSN != "" {
		b.Queue(s.st.confirmSlot, d.Slot, d.LSN)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		return fmt.Errorf("postgres: record delivered: %w", err)
	}
	return nil
}

// jsonOrString keeps a payload that is JSON and quotes one that is not, so
// an undecodable tableless event can still be stored as a DEAD row.
func jsonOrString(p []byte) string {
	if len(p) > 0 && jsonValid(p) {
		return string(p)
	}
	return quoteJSON(string(p))
}

func nullJSON(h []byte) *string {
	if len(h) == 0 || !jsonValid(h) {
		return nil
	}
	v := string(h)
	return &v
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// WaitVisible waits until the transactions xids (32-bit, as the log names
// them) are visible to new snapshots. Logical decoding hands over a commit
// as soon as its record is in the log, a moment before the committing
// backend leaves the process array: a statement run at once may still see
// the transaction as running and its rows as absent, and an archiving
// DELETE would quietly miss them.
func (s cdcSide) WaitVisible(ctx context.Context, xids []uint32) error {
	if len(xids) == 0 {
		return nil
	}
	for wait := 500 * time.Microsecond; ; wait = min(wait*2, 50*time.Millisecond) {
		var xmax int64
		var xip []int64
		err := s.pool.QueryRow(ctx, s.st.snapshot).Scan(&xmax, &xip)
		if err != nil {
			return fmt.Errorf("postgres: wait visible: %w", err)
		}
		if allVisible(xids, xmax, xip) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// allVisible reports whether every 32-bit xid is visible to a snapshot
// with the full (epoch-carrying) xmax and running list xip: below xmax and
// not running. An xid is widened to the epoch that puts it nearest xmax.
func allVisible(xids []uint32, xmax int64, xip []int64) bool {
	running := make(map[int64]bool, len(xip))
	for _, x := range xip {
		running[x] = true
	}
	for _, x := range xids {
		full := fullXID(x, xmax)
		if full >= xmax || running[full] {
			return false
		}
	}
	return true
}

// fullXID widens a 32-bit xid to 64 bits near ref.
func fullXID(x uint32, ref int64) int64 {
	full := ref&^0xFFFFFFFF | int64(x)
	switch d := full - ref; {
	case d > 1<<31:
		full -= 1 << 32
	case d < -(1 << 31):
		full += 1 << 32
	}
	return full
}

// slotsRegistered reports whether the registry of slots exists: only
// MigrateCDC creates it.
func (s cdcSide) slotsRegistered(ctx context.Context) (bool, error) {
	var reg bool
	err := s.pool.QueryRow(ctx, s.st.tableExists, s.slotsTable()).Scan(&reg)
	return reg, err
}

// SlotLagRows reads every registered slot (slot, exists, active, lag
// bytes, lag seconds); nil rows when MigrateCDC never ran.
func (s cdcSide) SlotLagRows(ctx context.Context) (pgx.Rows, error) {
	reg, err := s.slotsRegistered(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: slot lag: %w", err)
	}
	if !reg {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.st.slotLags)
	if err != nil {
		return nil, fmt.Errorf("postgres: slot lag: %w", err)
	}
	return rows, nil
}

// DropSlot drops a replication slot and forgets it. It refuses an active
// slot; a slot that does not exist is only removed from the registry.
func (s cdcSide) DropSlot(ctx context.Context, slot string) error {
	var exists, active bool
	err := s.pool.QueryRow(ctx, s.st.slotState, slot).Scan(&exists, &active)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: drop slot: %w", err)
	}
	if active {
		return fmt.Errorf("postgres: drop slot %s: %w", slot, cdcstore.ErrSlotActive)
	}
	if exists {
		if _, err := s.pool.Exec(ctx, s.st.dropSlot, slot); err != nil {
			return fmt.Errorf("postgres: drop slot %s: %w", slot, err)
		}
	}
	if reg, err := s.slotsRegistered(ctx); err == nil && reg {
		if _, err := s.pool.Exec(ctx, s.st.forgetSlot, slot); err != nil {
			return fmt.Errorf("postgres: drop slot %s: %w", slot, err)
		}
	}
	return nil
}

// CreateSlot creates a logical replication slot for the pgoutput plugin
// and registers it (the relay that first reads it still delivers the rows
// older than it). It reports false when the slot exists.
func (s cdcSide) CreateSlot(ctx context.Context, slot string) (bool, error) {
	ok, err := s.SlotExists(ctx, slot)
	if err != nil {
		return false, err
	}
	if !ok {
		if _, err := s.pool.Exec(ctx, s.st.createSlot, slot); err != nil {
			return false, fmt.Errorf("postgres: create slot %s: %w", slot, err)
		}
	}
	return !ok, s.RegisterSlot(ctx, slot, false, 0)
}

// SlotExists reports whether PostgreSQL has the slot.
func (s cdcSide) SlotExists(ctx context.Context, slot string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, s.st.slotExists, slot).Scan(&ok)
	return ok, err
}

// PendingRows reads up to limit undelivered rows (PENDING, RETRY,
// PROCESSING) with ids above afterID, in id order: a CDC relay whose slot
// is new delivers what the table held before the slot existed.
func (s cdcSide) PendingRows(ctx context.Context, afterID int64, limit int) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, s.st.pendingRows, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending rows: %w", err)
	}
	return collect(rows)
}

// SlotBackfill reads how far the rows older than the slot were delivered.
func (s cdcSide) SlotBackfill(ctx context.Context, slot string) (cdcstore.Backfill, error) {
	var b cdcstore.Backfill
	var end *string
	err := s.pool.QueryRow(ctx, s.st.slotBackfill, slot).Scan(&b.Done, &b.MaxID, &end)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, nil
	}
	if err != nil || end == nil {
		return b, err
	}
	var hi, lo uint64
	if _, err := fmt.Sscanf(*end, "%X/%X", &hi, &lo); err != nil {
		return b, fmt.Errorf("postgres: backfill end lsn %q: %w", *end, err)
	}
	b.EndLSN = hi<<32 | lo
	return b, nil
}

// LockBackfill makes one relay at a time deliver the rows older than a
// slot: a session advisory lock on a connection of its own, released by
// unlock or when the process dies.
func (s cdcSide) LockBackfill(ctx context.Context, slot string) (unlock func(), err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: backfill lock: %w", err)
	}
	key := "txbox-cdc-backfill:" + s.slotsTable() + ":" + slot
	if _, err := c.Exec(ctx, s.st.advisoryLock, key); err != nil {
		c.Release()
		return nil, fmt.Errorf("postgres: backfill lock: %w", err)
	}
	return func() {
		_, _ = c.Exec(context.Background(), s.st.advisoryUnlock, key)
		c.Release()
	}, nil
}

// StillPending returns which of ids are PENDING rows of the outbox table.
func (s cdcSide) StillPending(ctx context.Context, ids []int64) (map[int64]bool, error) {
	rows, err := s.pool.Query(ctx, s.st.stillPending, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: still pending: %w", err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// RowByID reads one outbox row: a CDC update whose payload the log left out
// (an unchanged TOASTed value) is read from the table.
func (s cdcSide) RowByID(ctx context.Context, id int64) (store.Record, bool, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, s.st.rowByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

func jsonValid(b []byte) bool { return json.Valid(b) }

func quoteJSON(s string) string {
	b, _ := json.Marshal(strings.ToValidUTF8(s, "\uFFFD"))
	return string(b)
}
