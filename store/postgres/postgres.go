// Package postgres is the PostgreSQL store (pgx v5). Claimed rows are held
// by the claim's open transaction (FOR UPDATE SKIP LOCKED; nothing is
// written to take them, and a dead relay's rows are free the moment its
// connection drops) or, with relay.ClaimLease and where no transaction can
// stay open, by a fenced lease written into the rows. Partial indexes keep
// delivered history out of the claim's way; migrations take an advisory
// lock. The store is also what inbox.New takes: its handlers get a pgx.Tx.
//
// Every SQL statement of this dialect is a file of queries/, printed for
// review by TestSQLGolden; the schema is in sql/.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Options configure the store. The zero value is usable.
type Options struct {
	Tables store.Tables // default outbox_event / inbox_event in the search path
	// DeleteSent deletes a row when the broker confirmed it instead of moving
	// it to the <outbox>_sent archive. Archiving is the default: operators can
	// see what was sent, and `txbox cleanup` trims the archive.
	DeleteSent bool
	// NoSplit keeps this store's claims looking at every aggregate even when
	// its relay runs beside others on the table (Split, split.go). Set it
	// when connections go through a pooler in transaction mode, which
	// cannot keep the session lock a member holds.
	NoSplit bool
	Logger  *slog.Logger // default slog.Default()
}

// maxTableName leaves room for the suffixes of derived index names inside
// PostgreSQL's 63-byte identifiers.
const maxTableName = 40

// Store implements store.Store on a pgx pool.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool
	tables store.Tables
	opts   Options
	log    *slog.Logger
	q      queries
	st     statements // the rest: the operator's, CDC's, the migrations'
	held   heldRows   // rows of this store's open transaction claims
	split  splitter   // membership among the relays of the table (split.go)
	// fallbacks counts the transaction claims that ran the fallback claim
	// (txclaim.go, more), for tests.
	fallbacks atomic.Int64
	floor     floorTracker
	inbox     *pgxtx.Inbox // begins inbox transactions (inbox.New)
	// Work that runs beside the claims (the floor's rescan); Close stops it.
	bgCtx  context.Context
	bgStop context.CancelFunc
	bgMu   sync.Mutex // orders bg.Add against Close's bg.Wait
	bgDone bool
	bg     sync.WaitGroup
}

// Open connects to url (postgres://...) and returns a store that owns the
// pool.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &txbox.ConfigError{Field: "--db (TXBOX_DB)", Reason: "invalid PostgreSQL URL: " + redactErr(err)}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s, err := New(pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New wraps an existing pool; Close leaves the pool open.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	t := opts.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	// PostgreSQL truncates identifiers at 63 bytes without an error; the
	// longest derived name is "<outbox>_aggregate_unsent_idx".
	for _, f := range []struct{ field, v string }{{"Tables.Outbox", t.Outbox}, {"Tables.Inbox", t.Inbox}} {
		if len(f.v) > maxTableName {
			return nil, &txbox.ConfigError{Field: f.field, Reason: fmt.Sprintf("%q is longer than %d characters", f.v, maxTableName)}
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{pool: pool, tables: t, opts: opts, log: opts.Logger, inbox: pgxtx.NewInbox(pool)}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	s.q = newQueries(t.Qualified(t.Outbox), t.Qualified(t.Outbox+"_sent"), opts.DeleteSent)
	s.st = newStatements(t)
	return s, nil
}

// Pool returns the underlying pool, for the write API and tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Tables returns the validated table names.
func (s *Store) Tables() store.Tables { return s.tables }

func (s *Store) Dialect() store.Dialect { return Dialect{Tables: s.tables} }

func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// goBackground runs f beside the claims until Close, which cancels ctx and
// waits for it; after Close it does not run f and reports false.
func (s *Store) goBackground(f func(ctx context.Context)) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgDone {
		return false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f(s.bgCtx)
	}()
	return true
}

func (s *Store) Close() error {
	s.bgMu.Lock()
	s.bgDone = true
	s.bgMu.Unlock()
	s.bgStop()
	s.bg.Wait()
	s.closeSplit()
	if s.owned {
		s.pool.Close()
	}
	return nil
}

const cols = `id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload::text, headers::text, status, retry_count, next_retry_at, locked_by, locked_until,
	occurred_at, created_at, sent_at, last_error`

// scanRecord reads a row of cols, then into extra the columns after them.
func scanRecord(row pgx.Row, extra ...any) (store.Record, error) {
	var r store.Record
	var payload, headers, lockedBy, lastErr *string
	var status string
	err := row.Scan(append([]any{&r.ID, &r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion, &r.EventType,
		&payload, &headers, &status, &r.RetryCount, &r.NextRetryAt, &lockedBy, &r.LockedUntil,
		&r.OccurredAt, &r.CreatedAt, &r.SentAt, &lastErr}, extra...)...)
	if err != nil {
		return r, err
	}
	r.Status = txbox.Status(status)
	if payload != nil {
		r.Payload = []byte(*payload)
	}
	if headers != nil {
		r.Headers = []byte(*headers)
	}
	if lockedBy != nil {
		r.LockedBy = *lockedBy
	}
	if lastErr != nil {
		r.LastError = *lastErr
	}
	return r, nil
}

func collect(rows pgx.Rows) ([]store.Record, error) {
	defer rows.Close()
	return sqlstore.Collect(rows, func(row interface{ Scan(...any) error }) (store.Record, error) { return scanRecord(row) })
}

func (s *Store) MarkSent(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, s.q.markSent, ids, lease)
	if err != nil {
		return 0, fmt.Errorf("postgres: mark sent: %w", refused(err))
	}
	return tag.RowsAffected(), nil
}

func (s *Store) MarkFailed(ctx context.Context, lease string, fs []store.Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, s.q.markFailed, append(failureArgs(fs), lease)...)
	if err != nil {
		return 0, fmt.Errorf("postgres: mark failed: %w", err)
	}
	return tag.RowsAffected(), nil
}

// failureArgs are the arrays the failure marks unnest ($1..$5): ids, dead,
// delays, errors, and the attempts each failure spends (0 for an outage).
func failureArgs(fs []store.Failure) []any {
	ids := make([]int64, len(fs))
	dead := make([]bool, len(fs))
	delay := make([]int64, len(fs))
	msgs := make([]string, len(fs))
	spend := make([]int32, len(fs))
	for i, f := range fs {
		ids[i], dead[i], delay[i], msgs[i], spend[i] = f.ID, f.Dead, f.Delay.Milliseconds(), sqlstore.Truncate(f.Error, 2000), f.Spends()
	}
	return []any{ids, dead, delay, msgs, spend}
}

func (s *Store) Release(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, s.q.release, ids, lease)
	if err != nil {
		return 0, fmt.Errorf("postgres: release: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Counts: map[txbox.Status]int64{}}
	rows, err := s.pool.Query(ctx, s.st.stats)
	if err != nil {
		return st, fmt.Errorf("postgres: stats: %w", err)
	}
	counts, err := sqladmin.StatusCounts(rows)
	rows.Close()
	if err != nil {
		return st, fmt.Errorf("postgres: stats: %w", err)
	}
	st.Counts, st.Dead = counts, counts[txbox.StatusDead]
	var ageMs *float64
	if err := s.pool.QueryRow(ctx, s.st.statsOldest).Scan(&st.OldestPending, &ageMs); err != nil {
		return st, fmt.Errorf("postgres: stats: %w", err)
	}
	if ageMs != nil {
		st.OldestAge = time.Duration(*ageMs * float64(time.Millisecond))
	}
	return st, nil
}

func ph(n int) string { return "$" + strconv.Itoa(n) }

// List reads the outbox table and, unless the filter asks for a status that
// is never archived, the archive of SENT rows.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	where, args := sqlstore.FilterSQL(f, ph, 1)
	rows, err := s.pool.Query(ctx, s.st.list(where, sqlstore.OrderBy(f), sqladmin.ListLimit(f), sqladmin.ReadsArchive(f)), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", err)
	}
	return collect(rows)
}

// Replay gives each replayed row a new id, so that it joins the queue at
// its end (queries/replay.sql).
func (s *Store) Replay(ctx context.Context, f store.Filter) (int64, error) {
	where, args := sqlstore.FilterSQL(sqlstore.DeadOnly(f), ph, 1)
	args = append(args, s.q.table)
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, s.st.filtered("replay.sql", where, false, ph(len(args))), args...).Scan(&n); err != nil {
			return err
		}
		return s.releaseHeldAfter(ctx, tx, n)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: replay: %w", err)
	}
	return n, nil
}

func (s *Store) Purge(ctx context.Context, f store.Filter) (int64, error) {
	where, args := sqlstore.FilterSQL(sqlstore.DeadOnly(f), ph, 1)
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.st.filtered("purge.sql", where, false, ""), args...)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return s.releaseHeldAfter(ctx, tx, n)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: purge: %w", err)
	}
	return n, nil
}

// CleanupBatch deletes at most limit SENT rows sent before now - age: from
// the archive first, then from the outbox table, which holds the rows marked
// in place before 003_sent_archive.sql.
func (s *Store) CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.cleanupBatch(ctx, s.pool, age, limit)
}

// execer runs a statement: the pool, or the one connection that holds the
// cleanup lock (cleanuplock.go).
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Store) cleanupBatch(ctx context.Context, on execer, age time.Duration, limit int) (int64, error) {
	var total int64
	for _, stmt := range []string{s.st.cleanupArchive, s.st.cleanupTable} {
		tag, err := on.Exec(ctx, stmt, age.Milliseconds(), limit-int(total))
		if err != nil {
			return total, fmt.Errorf("postgres: cleanup: %w", err)
		}
		if total += tag.RowsAffected(); total >= int64(limit) {
			break
		}
	}
	return total, nil
}

// redactErr keeps a parse error useful without echoing the URL, which may
// carry a password.
func redactErr(err error) string {
	var pe interface{ Unwrap() error }
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap().Error()
	}
	return "cannot parse connection string"
}
