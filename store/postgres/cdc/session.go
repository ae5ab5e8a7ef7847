package cdc

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// errSlotActive: another relay reads the slot (SQLSTATE 55006).
var errSlotActive = errors.New("replication slot is active")

// item is one committed transaction's events, or a part of them, or (no
// events) a position the server reported as sent: everything before it has
// been received. Items are delivered and confirmed strictly in order.
//
// A transaction larger than BatchSize is handed over in parts of BatchSize
// events as it is decoded, so a bulk write of a million events is neither
// held in memory whole nor published as one step; only its last part
// carries lsn, so the position moves past the transaction once all of it
// is delivered (a restart in the middle reads it again from the start: its
// events carry the same ids).
type item struct {
	changes []change
	lsn     pglogrepl.LSN // to confirm once delivered; 0 for a part that is not the last
	commit  pglogrepl.LSN // where the transaction's commit record starts (0: backfill rows, markers)
	xid     uint32        // of a transaction with rows, for Store.WaitVisible
}

// shutdownGrace bounds the step in flight once Run's ctx ended: a broker
// that is down must not hold the process for ever (the step is read again
// from the slot next time).
const shutdownGrace = 10 * time.Second

// withReplication adds replication=database to a postgres:// URL or a
// keyword/value connection string.
func withReplication(conn string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", fmt.Errorf("cdc: database URL: cannot parse")
		}
		q := u.Query()
		q.Set("replication", "database")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return conn + " replication=database", nil
}

// session is one replication connection: make sure the slot exists and
// the rows older than it are delivered, then stream until ctx ends or
// something fails.
func (r *Reader) session(ctx context.Context) error {
	cs, err := withReplication(r.cfg.ConnString)
	if err != nil {
		return err
	}
	conn, err := pgconn.Connect(ctx, cs)
	if err != nil {
		return fmt.Errorf("cdc: replication connection: %w", err)
	}
	defer conn.Close(context.Background())
	if err := r.ensureSlot(ctx, conn); err != nil {
		return err
	}
	err = pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + r.db.Publication() + "'",
			"messages 'true'"},
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" {
		return errSlotActive
	}
	if err != nil {
		return fmt.Errorf("cdc: start replication: %w", err)
	}
	r.log.Info("reading the slot")
	r.reading.Store(true)
	defer r.reading.Store(false)
	return r.stream(ctx, conn)
}

// ensureSlot creates the slot if it is missing; a slot not yet backfilled
// (new, or its first relay died before it was done) first gets the rows
// the table already holds delivered: rows committed before the slot
// existed are not in its log. A row committed after may come both ways;
// the copy carries the same event id.
func (r *Reader) ensureSlot(ctx context.Context, conn *pgconn.PgConn) error {
	s := r.db
	exists, err := s.SlotExists(ctx, r.cfg.Slot)
	if err != nil {
		return fmt.Errorf("cdc: slot: %w", err)
	}
	if !exists {
		_, err := pglogrepl.CreateReplicationSlot(ctx, conn, r.cfg.Slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") {
			return fmt.Errorf("cdc: create slot: %w", err)
		}
		if err == nil {
			r.log.Info("replication slot created")
		}
	}
	b, err := s.SlotBackfill(ctx, r.cfg.Slot)
	if err != nil {
		return err
	}
	if !b.Done {
		if b, err = r.backfill(ctx); err != nil {
			return err
		}
	}
	r.backfilled = b
	return nil
}

// backfill delivers the rows the table holds, one relay at a time, and
// returns how far it went.
func (r *Reader) backfill(ctx context.Context) (cdcstore.Backfill, error) {
	s := r.db
	unlock, err := s.LockBackfill(ctx, r.cfg.Slot)
	if err != nil {
		return cdcstore.Backfill{}, err
	}
	defer unlock()
	if b, err := s.SlotBackfill(ctx, r.cfg.Slot); err != nil || b.Done {
		return b, err // another relay did it while this one waited
	}
	// Registered before the rows are read, so a slot whose first relay
	// dies during the backfill is reported too.
	if err := s.RegisterSlot(ctx, r.cfg.Slot, false, 0); err != nil {
		return cdcstore.Backfill{}, err
	}
	var after int64
	total := 0
	for {
		r.beat()
		recs, err := s.PendingRows(ctx, after, r.cfg.BatchSize)
		if err != nil {
			return cdcstore.Backfill{}, err
		}
		if len(recs) == 0 {
			break
		}
		it := item{changes: make([]change, len(recs))}
		for i, rec := range recs {
			it.changes[i] = change{rec: rec}
		}
		if err := r.step(ctx, []item{it}, nil); err != nil {
			return cdcstore.Backfill{}, err
		}
		after = recs[len(recs)-1].ID
		total += len(recs)
		// Progress survives a crash: the rows delivered so far are
		// archived, and the log's copies of them are skipped.
		if err := s.RegisterSlot(ctx, r.cfg.Slot, false, after); err != nil {
			return cdcstore.Backfill{}, err
		}
	}
	if total > 0 {
		r.log.Info("delivered the rows older than the slot", "rows", total)
	}
	if err := s.RegisterSlot(ctx, r.cfg.Slot, true, after); err != nil {
		return cdcstore.Backfill{}, err
	}
	return s.SlotBackfill(ctx, r.cfg.Slot)
}

// stream reads the log and hands committed transactions, in order, to the
// delivery goroutine; it reports the confirmed position every
// StatusInterval, also while the delivery is behind, so the server does not
// time the connection out.
func (r *Reader) stream(ctx context.Context, conn *pgconn.PgConn) error {
	q := newQueue(r.cfg.BatchSize)
	var confirmed atomic.Uint64
	// Delivery outlives ctx by at most shutdownGrace, to finish and confirm
	// the step in flight.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopWork := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownGrace, cancelWork) })
	defer stopWork()
	delivered := make(chan error, 1)
	go func() { delivered <- r.deliverLoop(work, ctx.Done(), q, &confirmed) }()

	status := func(reply bool) error {
		lsn := pglogrepl.LSN(confirmed.Load())
		return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn, ReplyRequested: reply})
	}
	finish := func(err error) error {
		close(q.items)
		derr := <-delivered
		// The last confirmed position, so a restart reads as little again
		// as possible.
		if lsn := confirmed.Load(); lsn > 0 {
			_ = pglogrepl.SendStandbyStatusUpdate(context.Background(), conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(lsn)})
		}
		if err == nil {
			err = derr
		}
		return err
	}
	push := func(it item) error {
		tick := time.NewTicker(r.cfg.StatusInterval)
		defer tick.Stop()
		for {
			in := q.items
			if q.full() {
				in = nil // wait for q.taken
			}
			select {
			case in <- it:
				q.added(it)
				return nil
			case <-q.taken:
			case <-tick.C:
				r.beat()
				if err := status(false); err != nil {
					return err
				}
			case err := <-delivered:
				delivered <- err
				return fmt.Errorf("cdc: delivery: %w", err)
			case <-ctx.Done():
				return nil
			}
		}
	}

	dec := newDecoder(r.cfg.Store.Tables())
	var cur *item
	var commitTime time.Time
	next := time.Now()
	var sent uint64 // the position last reported
	var sentAt time.Time
	for {
		r.beat()
		if ctx.Err() != nil {
			return finish(nil)
		}
		select {
		case err := <-delivered:
			delivered <- err
			return finish(nil)
		default:
		}
		if !time.Now().Before(next) {
			// Asking for a reply makes the server say how far it has read,
			// which confirms past log of other tables while idle.
			sent = confirmed.Load()
			if err := status(len(q.items) == 0); err != nil {
				return finish(fmt.Errorf("cdc: status update: %w", err))
			}
			next = time.Now().Add(r.cfg.StatusInterval)
		} else if c := confirmed.Load(); c != sent && time.Since(sentAt) >= reportEvery {
			// A confirmed step is reported within confirmEvery, so a relay
			// killed now republishes little; not after every step, which
			// under a stream of small transactions would be one more write
			// per event.
			sent, sentAt = c, time.Now()
			if err := status(false); err != nil {
				return finish(fmt.Errorf("cdc: status update: %w", err))
			}
		}
		deadline := time.Now().Add(confirmEvery)
		if next.Before(deadline) {
			deadline = next
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) || ctx.Err() != nil {
				continue
			}
			return finish(fmt.Errorf("cdc: receive: %w", err))
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return finish(fmt.Errorf("cdc: %w", pgconn.ErrorResponseToPgError(msg)))
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return finish(fmt.Errorf("cdc: keepalive: %w", err))
				}
				if cur == nil {
					// A position marker, dropped when delivery is behind:
					// the next one will do.
					select {
					case q.items <- item{lsn: ka.ServerWALEnd}:
					default:
					}
				}
				if ka.ReplyRequested {
					next = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return finish(fmt.Errorf("cdc: xlog data: %w", err))
				}
				m, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					r.log.Debug("cdc: message not decoded", "err", err)
					continue
				}
				switch m := m.(type) {
				case *pglogrepl.RelationMessage:
					dec.relations[m.RelationID] = m
				case *pglogrepl.BeginMessage:
					cur, commitTime = &item{xid: m.Xid, commit: m.FinalLSN}, m.CommitTime
				case *pglogrepl.InsertMessage:
					if c, ok := dec.tuple(m.RelationID, m.Tuple); ok && cur != nil {
						cur.changes = append(cur.changes, c)
					}
				case *pglogrepl.UpdateMessage:
					if c, ok := dec.tuple(m.RelationID, m.NewTuple); ok && cur != nil {
						cur.changes = append(cur.changes, c)
					}
				case *pglogrepl.LogicalDecodingMessage:
					if c, ok := dec.message(m, commitTime); ok && cur != nil {
						cur.changes = append(cur.changes, c)
					}
				case *pglogrepl.CommitMessage:
					if cur != nil {
						cur.lsn = m.TransactionEndLSN
						if err := push(*cur); err != nil {
							return finish(err)
						}
					}
					cur = nil
				}
				if cur != nil && len(cur.changes) >= r.cfg.BatchSize {
					part := *cur
					if err := push(part); err != nil {
						return finish(err)
					}
					cur.changes = nil
				}
			}
		}
	}
}

// deliverLoop takes items in order, up to BatchSize events at a time, and
// steps them; it returns when items is closed, stop is closed between two
// steps, or a step fails.
func (r *Reader) deliverLoop(ctx context.Context, stop <-chan struct{}, q *queue, confirmed *atomic.Uint64) error {
	for {
		// A stop wins over waiting items: they stay in the slot.
		select {
		case <-stop:
			return nil
		default:
		}
		var batch []item
		n := 0 // events in batch
		take := func(it item) {
			q.took(it)
			batch = append(batch, it)
			n += len(it.changes)
		}
		select {
		case it, ok := <-q.items:
			if !ok {
				return nil
			}
			take(it)
		case <-stop:
			return nil
		}
	more:
		for n < r.cfg.BatchSize {
			select {
			case it, ok := <-q.items:
				if !ok {
					break more
				}
				take(it)
			default:
				break more
			}
		}
		if err := r.step(ctx, batch, confirmed); err != nil {
			return err
		}
	}
}

// confirmEvery bounds how long a confirmed step waits to be reported;
// reportEvery is the least time between two such reports.
const (
	confirmEvery = 50 * time.Millisecond
	reportEvery  = 10 * time.Millisecond
)

// registryEvery throttles the registry's position updates while idle.
var registryEvery = time.Second

// step publishes the events of items, records the outcome, and then
// (confirmed non-nil) confirms the last item's position.
func (r *Reader) step(ctx context.Context, items []item, confirmed *atomic.Uint64) error {
	s := r.db
	var recs []store.Record
	byID := map[int64]change{}
	var d deliveredSet
	var xids []uint32
	for _, it := range items {
		for _, c := range it.changes {
			if !c.message && it.xid != 0 {
				xids = append(xids, it.xid)
				break
			}
		}
	}
	// The rows must be visible before they are read, archived or marked.
	if err := s.WaitVisible(ctx, xids); err != nil {
		return err
	}
	skip, err := r.backfilledCopies(ctx, items, confirmed != nil)
	if err != nil {
		return err
	}
	for _, it := range items {
		for _, c := range it.changes {
			if c.message && c.rec.ID == 0 {
				r.log.Error("tableless event without an id skipped", "err", c.err)
				continue
			}
			if !c.message && skip[c.rec.ID] {
				continue
			}
			if c.fetch {
				rec, ok, err := s.RowByID(ctx, c.rec.ID)
				if err != nil {
					return err
				}
				if !ok || rec.Status != "PENDING" {
					continue
				}
				c.rec, c.fetch = rec, false
			}
			byID[c.rec.ID] = c
			if c.err != nil {
				d.dead(c, "permanent: "+c.err.Error())
				continue
			}
			recs = append(recs, c.rec)
		}
	}
	if len(recs) > 0 {
		out, err := r.rel.DeliverOrdered(ctx, recs)
		if err != nil {
			return err
		}
		for _, id := range out.Sent {
			if c := byID[id]; !c.message {
				d.Sent = append(d.Sent, id)
			}
		}
		for _, f := range out.Dead {
			d.dead(byID[f.ID], f.Error)
		}
		for _, f := range out.Held {
			d.held(byID[f.ID], f)
		}
	}
	var lsn pglogrepl.LSN
	for _, it := range items {
		lsn = max(lsn, it.lsn)
	}
	if confirmed != nil && lsn > pglogrepl.LSN(confirmed.Load()) {
		if d.events() > 0 || time.Since(r.registered) > registryEvery {
			d.Slot, d.LSN = r.cfg.Slot, lsn.String()
			r.registered = time.Now()
		}
	}
	if err := r.record(ctx, d); err != nil {
		return err
	}
	if confirmed != nil && lsn > pglogrepl.LSN(confirmed.Load()) {
		confirmed.Store(uint64(lsn))
	}
	return nil
}

// backfilledCopies returns the rows of the log that the backfill already
// delivered: rows committed before it ended, with ids at or below its
// highest, that are no longer PENDING in the table. (A row the backfill did
// not see, committed late with a low id, is still there and is delivered.)
// Past the backfill's end the log alone decides, so a reused id (TRUNCATE
// ... RESTART IDENTITY) cannot hide a row.
func (r *Reader) backfilledCopies(ctx context.Context, items []item, fromLog bool) (map[int64]bool, error) {
	b := r.backfilled
	if !fromLog || b.MaxID == 0 {
		return nil, nil
	}
	var low []int64
	for _, it := range items {
		at := it.commit
		if at == 0 {
			at = it.lsn
		}
		if b.EndLSN != 0 && uint64(at) > b.EndLSN {
			continue
		}
		for _, c := range it.changes {
			if !c.message && c.rec.ID <= b.MaxID {
				low = append(low, c.rec.ID)
			}
		}
	}
	if len(low) == 0 {
		return nil, nil
	}
	pending, err := r.db.StillPending(ctx, low)
	if err != nil {
		return nil, err
	}
	skip := make(map[int64]bool, len(low))
	for _, id := range low {
		skip[id] = !pending[id]
	}
	return skip, nil
}

// record retries the bookkeeping a few times before giving up the session
// (which then reads the same events again).
func (r *Reader) record(ctx context.Context, d deliveredSet) error {
	var err error
	for attempt := range 5 {
		if err = r.db.RecordDelivered(ctx, d.Delivered); err == nil {
			return nil
		}
		r.log.Warn("recording delivered events failed, retrying", "err", err, "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}
