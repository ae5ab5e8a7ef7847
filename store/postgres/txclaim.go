package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// ClaimTx implements claimapi.TxClaimer, the relay's interface to this
// store (internal: it changes with the claim protocol). The claim's rows
// stay locked by an open transaction on a connection of its own until
// Finish or Abort. BEGIN travels with the claim and COMMIT with the marks,
// so a claim costs two round trips. The rows are not written to claim them; a relay that dies
// drops its connection, and PostgreSQL releases the rows with it.
func (s *Store) ClaimTx(ctx context.Context, limit int) (claimapi.Claim, error) {
	c, err := s.claimTxRetry(ctx, limit, s.q.txClaim)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ClaimTxChained implements claimapi.ChainClaimer: ClaimTx that also takes the
// rows behind this store's other open claims (queries/window.sql, chain).
func (s *Store) ClaimTxChained(ctx context.Context, limit int) (claimapi.ChainedClaim, error) {
	c, err := s.claimTxRetry(ctx, limit, s.q.txChain)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Release implements claimapi.ChainedClaim: the rows leave this store's held
// list, so later claims see them as locked by another transaction
// (queries/window.sql, busy), which ends their aggregate's run there.
func (c *txClaim) Release(ids []int64) {
	h := &c.s.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.released == nil {
		c.released = make(map[int64]bool, len(ids))
	}
	for _, id := range ids {
		c.released[id] = true
	}
}

func (s *Store) claimTxRetry(ctx context.Context, limit int, query claimSQL) (*txClaim, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("postgres: claim: need limit > 0")
	}
	c, err := s.claimTx(ctx, limit, query)
	if err == nil && c.void {
		// The claim read from a floor the table's TRUNCATE made void (the
		// floor is reset now): what it took may skip rows below that floor.
		c.drop()
		c, err = s.claimTx(ctx, limit, query)
		if err == nil && c.void {
			c.drop()
			return nil, fmt.Errorf("postgres: claim: the outbox table was truncated twice during the claim; claim again")
		}
	}
	if err != nil {
		return nil, err
	}
	if len(c.recs) == 0 {
		c.Abort()
	} else {
		s.held.add(c)
	}
	return c, nil
}

func (s *Store) claimTx(ctx context.Context, limit int, query claimSQL) (*txClaim, error) {
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
	// blocked aggregates; the fallback below covers the rest. Split among
	// n relays (split.go), this store keeps 1/n of the window, and the
	// others' rows in flight sit at the front too, about as many as its
	// own: so the window is n times as wide. A window sized for one relay
	// would leave a share shorter than a batch, and each short claim runs
	// the fallback, whose scan grows with the backlog.
	held := s.held.ids()
	window := min((len(held)+limit*txScanFactor)*s.splitMembers(), maxWindow)
	gen := s.floor.generation()
	floor, chk, rescan := s.floor.get(time.Now())
	if rescan {
		s.startRescan(floor)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(planClaim)
	split := s.splitArg()
	q := query.shared
	if s.claimAlone() {
		q = query.alone
	}
	b.Queue(q, limit, window, held, floor, split)
	if s.floor.on {
		b.Queue(s.q.floorProbe, floor, chk.marker, chk.vxids, chk.since, s.q.table)
	}
	sent := time.Now()
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	var full *bool // whether the window was full; nil: unknown
	if err == nil {
		c.recs, full, err = collectClaim(br)
	}
	if err == nil && s.floor.on {
		err = c.observeFloor(br, probeResult{from: floor, checked: chk.marker, sent: sent, gen: gen})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(c.recs) < limit {
		err = c.more(ctx, limit, window, floor, split, full)
	}
	if err != nil {
		c.drop()
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	return c, nil
}

// planClaim sets two planner settings for the claim's transaction (SET
// LOCAL: they end with it), each worth a multiple of the claim's cost
// (BENCHMARKS.md, "Figures behind choices in the code"):
//   - enable_bitmapscan: the window must be an ordered walk of the unsent
//     index that stops after the window's rows. The planner instead reads the
//     whole backlog with a bitmap scan and sorts it whenever the table's
//     statistics say the unsent rows are few: a table never analysed
//     (autovacuum off), or analysed while its queue was empty, just before a
//     backlog built up.
//   - jit: on a large table the claim's estimates pass jit_above_cost, and
//     compiling costs more than the claim. enable_seqscan = off would
//     trigger exactly that through the floor probe's sequence read, so it
//     stays on.
//
// The claim statement is prepared once per connection, and PostgreSQL
// switches to a generic plan after five runs; the claim (queries/) is written so
// that the generic plan is as good as a custom one (see missed in lock.sql).
const planClaim = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`

// txScanFactor sizes a transaction claim's window beyond the rows this store
// holds: limit*txScanFactor rows.
const txScanFactor = 3

// more runs the head-based claim in the same transaction when the window
// was full of rows that could not be taken: deliverable rows may lie beyond
// it. full is what the claim said of its window; nil: it did not, and
// windowFull asks.
func (c *txClaim) more(ctx context.Context, limit, window int, floor int64, split []int64, full *bool) error {
	if full == nil {
		full = new(bool)
		if err := c.conn.QueryRow(ctx, c.s.q.windowFull, window, floor).Scan(full); err != nil {
			return err
		}
	}
	if !*full {
		return nil
	}
	c.s.fallbacks.Add(1)
	rows, err := c.conn.Query(ctx, c.s.q.txHeads, limit-len(c.recs), min(limit, maxRun), split)
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
func (c *txClaim) observeFloor(br pgx.BatchResults, p probeResult) error {
	if err := br.QueryRow().Scan(&p.m, &p.cleared, &p.next, &p.node); err != nil {
		return err
	}
	p.read = time.Now()
	if c.s.floor.rewritten(p) {
		c.void = true
		return nil
	}
	if c.s.floor.observe(p) {
		c.propose = &p.m
		c.proposeGen = p.gen
	}
	return nil
}

// startRescan looks below the floor (floor.go) on a connection of its own,
// so that no claim waits for it.
func (s *Store) startRescan(floor int64) {
	started := s.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		var low *int64
		start := time.Now()
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, planClaim); err != nil {
				return err
			}
			return tx.QueryRow(ctx, s.q.floorBelow, floor).Scan(&low)
		})
		if err != nil {
			low = nil
			s.log.Debug("txbox: claim floor: looking below the floor failed", "err", err)
		}
		if below, found := s.floor.rescanned(time.Now(), time.Since(start), low); found {
			s.log.Warn("txbox: an unsent outbox row lies below the claim floor; were ids written by hand or from a cached sequence?",
				"table", s.q.table, "id", *low, "floor", below)
		}
	})
	if !started {
		s.floor.rescanned(time.Now(), 0, nil)
	}
}

// markFloor takes a proposed candidate's marker (floor.go, step 2) once the
// claim's transaction has ended. A failure costs only this candidate.
func (c *txClaim) markFloor(ctx context.Context) {
	if c.propose == nil {
		return
	}
	f := floorCand{m: *c.propose, gen: c.proposeGen}
	if err := c.conn.QueryRow(ctx, floorMark).Scan(&f.marker, &f.since, &f.vxids); err != nil {
		c.s.log.Debug("txbox: claim floor: taking a marker failed", "err", err)
		return
	}
	c.s.floor.add(f)
}

// floorMark runs in a transaction of its own: txid_current() takes a new
// xid, above every xid handed out before.
const floorMark = `SELECT txid_current(), now(), coalesce(array_agg(l.virtualxid), '{}')
FROM pg_locks l WHERE l.locktype = 'virtualxid' AND l.granted AND l.pid <> pg_backend_pid()`

// collectClaim reads the claim's rows and its window_full column (the same
// in every row; nil without rows).
func collectClaim(br pgx.BatchResults) ([]store.Record, *bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []store.Record
	var full *bool
	for rows.Next() {
		r, err := scanRecord(rows, &full)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	return out, full, rows.Err()
}

type txClaim struct {
	s          *Store
	conn       *pgxpool.Conn // nil once ended
	recs       []store.Record
	propose    *int64 // a floor candidate to mark when the transaction ends
	proposeGen uint64
	// void: the claim read from a floor that a TRUNCATE of the table made
	// void; ClaimTx drops it and claims again.
	void bool
	// keepOnRefusal: Finish keeps the connection after a refused mark, for
	// FinishIsolating.
	keepOnRefusal bool
	// released: rows released early (Release); guarded by the store's
	// heldRows.mu.
	released map[int64]bool
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
		b.Queue(c.s.q.txFailed, failureArgs(failures)...)
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
		if err = refused(err); c.keepOnRefusal && errors.Is(err, store.ErrRefused) {
			return fmt.Errorf("postgres: finish claim: %w", err) // FinishIsolating takes over
		}
		// The transaction did not commit: drop the connection, so the server
		// rolls it back and the rows are free again.
		c.drop()
		return fmt.Errorf("postgres: finish claim: %w", err)
	}
	c.markFloor(ctx)
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
	c.markFloor(ctx)
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
			if !c.released[r.ID] {
				out = append(out, r.ID)
			}
		}
	}
	return out
}
