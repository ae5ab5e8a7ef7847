package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox/store"
)

// ClaimTx implements store.TxClaimer: the claim's rows stay locked by an
// open transaction on a connection of its own until Finish or Abort. BEGIN
// travels with the claim and COMMIT with the marks, so a claim costs two
// round trips. The rows are not written to claim them; a relay that dies
// drops its connection, and PostgreSQL releases the rows with it.
func (s *Store) ClaimTx(ctx context.Context, limit int) (store.Claim, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("postgres: claim: need limit > 0")
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	if err := s.floorSetup(ctx); err != nil {
		conn.Release()
		return nil, err
	}
	c := &txClaim{s: s, conn: conn}
	// The window covers this store's rows in flight, which sit at the front
	// and cannot be taken, and a margin for other processes' claims and
	// blocked aggregates; the fallback below covers the rest.
	held := s.held.ids()
	window := min(len(held)+limit*txScanFactor, MaxWindow)
	floor := s.floor.get(time.Now())
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.q.txClaim, limit, window, held, floor)
	if s.floor.on {
		b.Queue(s.q.floorProbe, floor)
	}
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		c.recs, err = collectBatch(br)
	}
	if err == nil && s.floor.on {
		err = s.observeFloor(br, floor)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(c.recs) < limit {
		err = c.more(ctx, limit, window, floor)
	}
	if err != nil {
		c.drop()
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	if len(c.recs) == 0 {
		c.Abort()
	} else {
		s.held.add(c)
	}
	return c, nil
}

// txScanFactor sizes a transaction claim's window beyond the rows this store
// holds: limit*txScanFactor rows.
const txScanFactor = 3

// more runs the head-based claim in the same transaction when the window
// was full of rows that could not be taken: deliverable rows may lie beyond
// it.
func (c *txClaim) more(ctx context.Context, limit, window int, floor int64) error {
	var full bool
	if err := c.conn.QueryRow(ctx, c.s.q.windowFull, window, floor).Scan(&full); err != nil || !full {
		return err
	}
	rows, err := c.conn.Query(ctx, c.s.q.txHeads, limit-len(c.recs), min(limit, MaxRun), floor)
	if err != nil {
		return err
	}
	more, err := collect(rows)
	if err != nil {
		return err
	}
	seen := make(map[int64]bool, len(c.recs))
	for _, r := range c.recs {
		seen[r.ID] = true
	}
	for _, r := range more {
		if !seen[r.ID] {
			c.recs = append(c.recs, r)
		}
	}
	sortByID(c.recs)
	return nil
}

// observeFloor reads the floor probe queued after the claim.
func (s *Store) observeFloor(br pgx.BatchResults, from int64) error {
	var m, xmin, xmax int64
	if err := br.QueryRow().Scan(&m, &xmin, &xmax); err != nil {
		return err
	}
	if below, ok := s.floor.observe(from, m, xmin, xmax, time.Now()); ok {
		s.log.Warn("txbox: an unsent outbox row lies below the claim floor; were ids written by hand or from a cached sequence?",
			"table", s.q.table, "id", m, "floor", below)
	}
	return nil
}

func collectBatch(br pgx.BatchResults) ([]store.Record, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return collect(rows)
}

type txClaim struct {
	s    *Store
	conn *pgxpool.Conn // nil once ended
	recs []store.Record
}

func (c *txClaim) Records() []store.Record { return c.recs }

// Finish sends the marks and COMMIT in one round trip.
func (c *txClaim) Finish(ctx context.Context, sent []int64, failures []store.Failure) error {
	if c.conn == nil {
		if len(sent)+len(failures) > 0 {
			return errors.New("postgres: finish: the claim has ended")
		}
		return nil
	}
	b := &pgx.Batch{}
	if len(sent) > 0 {
		b.Queue(c.s.q.txSent, sent)
	}
	if len(failures) > 0 {
		ids, dead, delay, msgs := failureArrays(failures)
		b.Queue(c.s.q.txFailed, ids, dead, delay, msgs)
	}
	b.Queue("COMMIT")
	br := c.conn.SendBatch(ctx, b)
	var err error
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The transaction did not commit: drop the connection, so the server
		// rolls it back and the rows are free again.
		c.drop()
		return fmt.Errorf("postgres: finish claim: %w", err)
	}
	c.end(false)
	return nil
}

// Abort rolls back; if that fails the connection is closed, which rolls
// back too.
func (c *txClaim) Abort() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if _, err := c.conn.Exec(ctx, "ROLLBACK"); err != nil {
		c.drop()
		return
	}
	c.end(false)
}

// drop closes the connection instead of returning it to the pool: its
// transaction state is unknown, and closing is what ends it for sure.
func (c *txClaim) drop() {
	if c.conn == nil {
		return
	}
	c.end(true)
}

// end gives the connection back (or closes it) and forgets the held rows.
func (c *txClaim) end(closeConn bool) {
	if closeConn {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_ = c.conn.Conn().Close(ctx)
		cancel()
	}
	c.conn.Release()
	c.conn = nil
	c.s.held.remove(c)
}

// heldRows tracks the open claims of one Store, so that a claim can leave
// out the rows (and aggregates) its siblings hold.
type heldRows struct {
	mu     sync.Mutex
	claims map[*txClaim]struct{}
}

func (h *heldRows) add(c *txClaim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.claims == nil {
		h.claims = map[*txClaim]struct{}{}
	}
	h.claims[c] = struct{}{}
}

func (h *heldRows) remove(c *txClaim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.claims, c)
}

func (h *heldRows) ids() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []int64{}
	for c := range h.claims {
		for _, r := range c.recs {
			out = append(out, r.ID)
		}
	}
	return out
}
