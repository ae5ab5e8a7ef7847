package pgxtx

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// spName is the one savepoint name of a shared transaction: each event's
// savepoint releases the previous event's before it is taken, so at most one
// exists at a time (beside any a handler takes itself).
const spName = "txbox_sp"

const (
	spRelease  = "RELEASE SAVEPOINT " + spName
	spTake     = "SAVEPOINT " + spName
	spRollback = "ROLLBACK TO SAVEPOINT " + spName
)

// spTx is the pgx.Tx of a shared transaction, handed to the handlers and
// used for the inbox's own statements. An event's savepoint (with the
// release of the previous event's) is not a round trip of its own: it is
// sent with the next statement, normally the handler's first, in one pgx
// batch. An event whose handler sends nothing needs no savepoint at all.
//
// Exec and QueryRow with arguments carry the savepoint in their batch, once
// the same SQL text has run on its own before; any other use of the
// transaction (Query, SendBatch, CopyFrom, Begin, Conn, ...) sends it first,
// on its own. The condition matters: pgx prepares a batch's new statements
// and encodes all arguments before it runs any of them, and a statement
// that does not parse (or whose arguments do not encode) would break the
// transaction while the event's savepoint is not taken yet.
type spTx struct {
	pgx.Tx
	known  *sqlSet
	live   bool  // a savepoint named spName exists
	want   bool  // the next statement must first take the event's savepoint
	broken error // a savepoint command failed: the transaction is unusable
}

// sqlSet is the SQL texts that ran, each on its own, without error: those
// that may carry a savepoint in their batch. A text whose batch failed
// before it ran is banned from batches for good.
type sqlSet struct {
	mu sync.RWMutex
	m  map[string]bool // true: ran fine; false: banned
}

// maxKnownSQL bounds a sqlSet; a handler building SQL texts on the fly
// then pays a round trip for its savepoint beyond that.
const maxKnownSQL = 1000

func (s *sqlSet) has(q string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[q]
}

func (s *sqlSet) add(q string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]bool{}
	}
	if _, seen := s.m[q]; !seen && len(s.m) < maxKnownSQL {
		s.m[q] = true
	}
}

func (s *sqlSet) ban(q string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]bool{}
	}
	s.m[q] = false
}

func (t *spTx) mark() error {
	t.want = true
	return t.broken
}

func (t *spTx) undo(ctx context.Context) error {
	if t.broken != nil {
		return t.broken
	}
	if t.want {
		return nil // nothing was sent since mark: nothing to undo
	}
	_, err := t.Tx.Exec(ctx, spRollback)
	return err
}

// flush takes the pending savepoint in a round trip of its own.
func (t *spTx) flush(ctx context.Context) error {
	if !t.want || t.broken != nil {
		return t.broken
	}
	t.want = false
	q := spTake
	if t.live {
		q = spRelease + "; " + spTake // no arguments: one simple-protocol round trip
	}
	if _, err := t.Tx.Exec(ctx, q); err != nil {
		t.broken = err
		return err
	}
	t.live = true
	return nil
}

// pipelined reports whether a statement takes the pending savepoint along
// in its batch: one is pending, the statement ran on its own before, it has
// arguments (without them pgx uses the simple protocol, which allows
// several statements in one string) and no per-query options.
func (t *spTx) pipelined(sql string, args []any) bool {
	if !t.want || t.broken != nil || len(args) == 0 {
		return false
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryRewriter:
		return false
	}
	return t.known.has(sql)
}

// send queues the pending savepoint and the statement in one batch and
// reads the savepoint's results; the caller reads the statement's and closes
// the batch.
func (t *spTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	n := 1
	if t.live {
		b.Queue(spRelease)
		n++
	}
	b.Queue(spTake)
	b.Queue(sql, args...)
	t.want = false
	br := t.Tx.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			// The savepoint did not run. Whatever stopped it (the statement
			// no longer parses, which aborts the transaction; its arguments
			// cannot be encoded, on which pgx drops the connection), the
			// transaction cannot be taken back to the start of this event:
			// it is given up, and the statement runs alone from now on, so
			// that it fails alone next time.
			t.broken = err
			t.known.ban(sql)
			return br, err
		}
	}
	t.live = true
	return br, nil
}

func (t *spTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !t.pipelined(sql, args) {
		if err := t.flush(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		tag, err := t.Tx.Exec(ctx, sql, args...)
		if err == nil && len(args) > 0 {
			t.known.add(sql)
		}
		return tag, err
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *spTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !t.pipelined(sql, args) {
		if err := t.flush(ctx); err != nil {
			return errRow{err}
		}
		return &learnRow{row: t.Tx.QueryRow(ctx, sql, args...), known: t.known, sql: sql}
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		_ = br.Close()
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// batchRow is a QueryRow that rode in a batch: the batch is closed once the
// row is scanned, as pgx's own QueryRow holds the connection until then.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// learnRow records the SQL text of a row that scanned (or found no row).
type learnRow struct {
	row   pgx.Row
	known *sqlSet
	sql   string
}

func (r *learnRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		r.known.add(r.sql)
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// The rest send the pending savepoint first. If that fails, the
// transaction is aborted and the call itself reports it.

func (t *spTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	_ = t.flush(ctx)
	return t.Tx.Query(ctx, sql, args...)
}

func (t *spTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	_ = t.flush(ctx)
	return t.Tx.SendBatch(ctx, b)
}

func (t *spTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	_ = t.flush(ctx)
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

func (t *spTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	_ = t.flush(ctx)
	return t.Tx.Prepare(ctx, name, sql)
}

func (t *spTx) Begin(ctx context.Context) (pgx.Tx, error) {
	_ = t.flush(ctx)
	return t.Tx.Begin(ctx)
}

func (t *spTx) LargeObjects() pgx.LargeObjects {
	_ = t.flush(context.Background())
	return t.Tx.LargeObjects()
}

func (t *spTx) Conn() *pgx.Conn {
	_ = t.flush(context.Background())
	return t.Tx.Conn()
}
