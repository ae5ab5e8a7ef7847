// Package sqlite is the SQLite store, on the pure-Go driver modernc.org/sqlite
// (driver name "sqlite"; no cgo). It is meant for single-host services, tests
// and demos: SQLite has one writer per database file, and this store leans on
// that instead of fighting it.
//
// What it guarantees, and why:
//
//   - A claim is one write transaction begun with BEGIN IMMEDIATE on a
//     dedicated connection. IMMEDIATE takes the write lock before the claim
//     reads anything, so two claimers (goroutines or processes) queue on the
//     busy timeout and run one after the other. A DEFERRED transaction would
//     read first and then try to upgrade to a writer, and two such upgrades
//     fail with SQLITE_BUSY instead of waiting. One writer at a time is also
//     why concurrent claimers never receive the same row: SQLite has no
//     SKIP LOCKED and needs none.
//   - Before taking the write lock, a claim checks with a plain read (WAL
//     readers never wait) whether anything is claimable. An idle relay polling
//     an empty outbox therefore never queues behind the application's write
//     transactions. A claim that has work does queue behind them, and fails
//     with SQLITE_BUSY if one holds the write lock longer than the busy
//     timeout; the relay's next poll tries again.
//   - The claim itself is the same head-of-aggregate statement as on
//     PostgreSQL (queries/claim.sql), and partial indexes on the unsent rows keep
//     it independent of how much delivered history the table holds.
//   - Every mark is one fenced statement (locked_by = lease AND status =
//     PROCESSING), its own short write transaction; id lists travel as one
//     JSON array parameter read with json_each, so no variable limit applies.
//   - Timestamps are INTEGER unix microseconds, UTC. The database clock is the
//     host clock: SQLite runs in this process, so "now" is taken in Go with
//     microsecond precision. A foreign producer that omits created_at and
//     occurred_at gets the column DEFAULT, SQLite's own clock, which has
//     millisecond resolution.
//   - payload and headers are TEXT holding the producer's bytes unchanged;
//     CHECK (json_valid(...)) rejects invalid JSON at write time.
//   - Migrations are embedded (sql/*.sql), versioned in <outbox>_migrations
//     and applied in one IMMEDIATE transaction, so two processes migrating at
//     once serialize and each migration is applied exactly once; SQLite DDL
//     is transactional.
//   - The inbox (inbox.go, sql/002_inbox.sql) dedupes with INSERT ... ON
//     CONFLICT (event_id, consumer_name) DO NOTHING: one row inserted means
//     first delivery, no error is a signal, and only the key conflict is
//     absorbed. Every inbox transaction writes first, so it holds the write
//     lock before it reads: a concurrent delivery of the same event waits on
//     the busy timeout and then sees the outcome, even in a DEFERRED
//     transaction (see inbox.go).
//
// Open configures each connection with journal_mode=WAL (readers and the one
// writer do not block each other), busy_timeout=5000 ms and _txlock=immediate
// (so the application's own write transactions on DB() also take the write
// lock up front and cannot fail on upgrade). A store made with New uses the
// caller's *sql.DB as it is: give it at least a busy timeout, e.g.
// "file:app.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate".
//
// ":memory:" databases are refused: every pooled connection would open its own
// empty database. Use a file (t.TempDir() in tests).
//
// Every SQL statement of this dialect is a file of queries/ or, for the
// transaction control, a constant of immediate.go, each printed for review
// by TestSQLGolden; the schema is in sql/. The outbox INSERT is sqlstore's
// (dialect.go).
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Options configure the store. The zero value is usable.
type Options struct {
	Tables store.Tables // default outbox_event / inbox_event; Schema must be empty
	// DeleteSent deletes a row when the broker confirmed it instead of keeping
	// it as SENT. Keeping is the default: operators can see what was sent, the
	// partial indexes keep claims fast anyway, and `txbox cleanup` trims it.
	DeleteSent bool
	Logger     *slog.Logger // default slog.Default()
	// Now is the store's clock: claims, leases, marks, releases, retry
	// delays, sent_at, cleanup cut-offs and stats ages read it. SQLite has no
	// server clock of its own, so this is the database clock; tests move it
	// to show what a host clock jump does to held leases. Default time.Now.
	// The inbox's timestamps, written by the Dialect in the consumer's own
	// transaction, stay on time.Now, and so does the inbox cleanup cut-off
	// compared with them.
	Now func() time.Time
}

// withDefaults returns o with every unset field at its default.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// busyTimeout is how long Open's connections wait for the write lock.
const busyTimeout = 5 * time.Second

// Store implements store.Store on a database/sql pool of SQLite connections.
type Store struct {
	db     *sql.DB
	owned  bool
	tables store.Tables
	opts   Options
	log    *slog.Logger
	q      queries
}

// Open opens (creating if needed) the SQLite database file at path and
// returns a store that owns the pool. path is a file path; a "sqlite://" or
// "sqlite:" prefix, as in `--db sqlite://app.db`, is accepted and dropped.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	// A plain path, not a file: URI, so the path needs no escaping; the
	// driver strips the query before opening the file.
	dsn := p + "?_pragma=busy_timeout(" + strconv.Itoa(int(busyTimeout/time.Millisecond)) + ")" +
		"&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", p, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", p, err)
	}
	s, err := New(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

func cleanPath(path string) (string, error) {
	p := path
	for _, prefix := range []string{"sqlite://", "sqlite:"} {
		if strings.HasPrefix(p, prefix) {
			p = strings.TrimPrefix(p, prefix)
			break
		}
	}
	field := "--db (TXBOX_DB)"
	switch {
	case p == "":
		return "", &txbox.ConfigError{Field: field, Reason: "SQLite needs a database file path"}
	case p == ":memory:" || strings.HasPrefix(p, "file::memory:") || strings.Contains(p, "mode=memory"):
		return "", &txbox.ConfigError{Field: field, Reason: "in-memory SQLite is not supported: each pooled connection would see its own empty database; use a file"}
	case strings.HasPrefix(p, "file:"):
		return "", &txbox.ConfigError{Field: field, Reason: "give a plain file path, not a file: URI; use New with your own *sql.DB for custom DSNs"}
	case strings.ContainsAny(p, "?#"):
		return "", &txbox.ConfigError{Field: field, Reason: "SQLite file path must not contain '?' or '#'"}
	}
	return p, nil
}

// New wraps an existing *sql.DB opened with the "sqlite" driver; Close leaves
// it open. See the package documentation for the settings it should carry.
func New(db *sql.DB, opts Options) (*Store, error) {
	t, err := sqlstore.Tables(opts.Tables)
	if err == nil {
		err = noSchema(t)
	}
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Store{db: db, tables: t, opts: opts, log: opts.Logger}
	s.q = newQueries(t.Outbox, t.Inbox, opts.DeleteSent)
	return s, nil
}

// DB returns the underlying pool, for the write API and tests.
func (s *Store) DB() *sql.DB { return s.db }

// Tables returns the validated table names.
func (s *Store) Tables() store.Tables { return s.tables }

// now is the database clock (Options.Now).
func (s *Store) now() time.Time { return s.opts.Now() }

func (s *Store) Dialect() store.Dialect { return Dialect{Tables: s.tables} }

func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *Store) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

const cols = `id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload, headers, status, retry_count, next_retry_at, locked_by, locked_until,
	occurred_at, created_at, sent_at, last_error`

// micros is the stored form of a timestamp.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func scanRecord(row interface{ Scan(...any) error }) (store.Record, error) {
	var r store.Record
	var status string
	var lockedBy, lastErr sql.NullString
	var next, until, sent sql.NullInt64
	var occurred, created int64
	err := row.Scan(&r.ID, &r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion, &r.EventType,
		&r.Payload, &r.Headers, &status, &r.RetryCount, &next, &lockedBy, &until,
		&occurred, &created, &sent, &lastErr)
	if err != nil {
		return r, err
	}
	r.Status = txbox.Status(status)
	r.NextRetryAt, r.LockedUntil, r.SentAt = optTime(next), optTime(until), optTime(sent)
	r.OccurredAt, r.CreatedAt = fromMicros(occurred), fromMicros(created)
	r.LockedBy, r.LastError = lockedBy.String, lastErr.String
	return r, nil
}

func collect(rows *sql.Rows) ([]store.Record, error) {
	defer rows.Close()
	return sqlstore.Collect(rows, func(row interface{ Scan(...any) error }) (store.Record, error) { return scanRecord(row) })
}

// idsJSON passes an id list as one JSON array parameter, read back with
// json_each: one statement text whatever the length, and no variable limit.
func idsJSON(ids []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(']')
	return b.String()
}

func (s *Store) exec(ctx context.Context, what, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return n, nil
}
