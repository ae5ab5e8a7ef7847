package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

// The inbox transaction's SQL. Everything runs on the consumer's own
// transaction (a *sql.Tx wrapped by store.SQLTx).
//
// Locking: SQLite has one writer per database, so there is no row lock to
// take. Every inbox method starts with a write (the insert-if-absent, the
// upsert), so the transaction takes the write lock before it reads anything
// and keeps it until COMMIT: a concurrent delivery of the same event waits
// for it on the busy timeout and then finds the row. Because the first
// statement is a write, this holds even in a DEFERRED transaction: SQLite
// waits on the busy handler for a write lock that a transaction without a
// read snapshot asks for, and only a read-then-write upgrade fails with
// SQLITE_BUSY at once. Open's pools begin with BEGIN IMMEDIATE anyway
// (_txlock=immediate). A caller who runs InboxAcquire inside a DEFERRED
// transaction that has already read must expect SQLITE_BUSY (as for any
// write there).

// inboxSQL is the inbox statements of each Dialect's tables
// (queries/inbox_*.sql, version_*.sql).
var inboxSQL = sqlinbox.Statements(newInboxQueries, noSchema)

// inbox returns the inbox statements for d's tables.
func (d Dialect) inbox() (inboxQueries, error) { return inboxSQL.Get(d.Tables) }

// inboxDialect is the store's inbox SQL (store.InboxDialect, reached
// through InboxDialect): Dialect, the writer's, is the outbox's alone.
type inboxDialect struct{ Dialect }

// InboxAcquire implements store.InboxDialect with INSERT ... ON CONFLICT
// (event_id, consumer_name) DO NOTHING (queries/inbox_insert.sql): one row
// inserted means first delivery; otherwise the row says which case it is.
func (d inboxDialect) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, 0, err
	}
	n, err := tx.Exec(ctx, q.inboxInsert, e.ID, consumer, e.Type, micros(time.Now()), e.AggregateType, e.AggregateID, e.AggregateVersion, nullMicros(e.OccurredAt))
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox insert: %w", err)
	}
	if n == 1 {
		return store.InboxFresh, 0, nil
	}
	// The insert took the write lock: the row cannot change until we commit.
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, q.inboxLookup, e.ID, consumer).Scan(&status, &attempts); err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox lookup: %w", err)
	}
	if state, ok := sqlinbox.Existing(status); ok {
		return state, attempts, nil
	}
	if _, err := tx.Exec(ctx, q.inboxRetry, e.ID, consumer); err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox retry: %w", err)
	}
	return store.InboxRetry, attempts, nil
}

// InboxDone implements store.InboxDialect.
func (d inboxDialect) InboxDone(ctx context.Context, tx store.Tx, consumer, eventID string, status txbox.Status, note string) error {
	q, err := d.inbox()
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, q.inboxDone, string(status), micros(time.Now()), sqlinbox.Note(note), eventID, consumer)
	if err != nil {
		return fmt.Errorf("sqlite: inbox done: %w", err)
	}
	return nil
}

// InboxFail implements store.InboxDialect with one upsert
// (queries/inbox_fail.sql): no row back means the row was PROCESSED or
// SKIPPED meanwhile.
func (d inboxDialect) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (int, bool, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	if err := sqlinbox.CheckAgain("sqlite", again); err != nil {
		return 0, false, err
	}
	var attempts int
	var status string
	err = tx.QueryRow(ctx, q.inboxFail,
		e.ID, consumer, e.Type, maxAttempts, string(again), micros(time.Now()), sqlstore.Truncate(errMsg, 2000),
		e.AggregateType, e.AggregateID, e.AggregateVersion, nullMicros(e.OccurredAt), sqlstore.EncodeHeaders(e.Headers), string(e.Payload),
	).Scan(&attempts, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // processed meanwhile by another delivery
	}
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: inbox fail: %w", err)
	}
	return attempts, status == string(txbox.StatusDead), nil
}

// InboxVersion implements store.InboxDialect: an upsert whose DO UPDATE
// only fires for a higher version; no row returned means stale.
func (d inboxDialect) InboxVersion(ctx context.Context, tx store.Tx, consumer, aggType, aggID string, version int64) (int64, bool, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	var v int64
	err = tx.QueryRow(ctx, q.versionRaise, consumer, aggType, aggID, version, micros(time.Now())).Scan(&v)
	if err == nil {
		return v, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: version guard: %w", err)
	}
	if err := tx.QueryRow(ctx, q.versionRead, consumer, aggType, aggID).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("sqlite: version guard: %w", err)
	}
	return v, false, nil
}

// Admin side, on the store's pool.

func (s *Store) inboxTable() string { return s.tables.Inbox } // validated by New

// inboxFilter builds the WHERE clause for f; timestamps become microseconds.
func inboxFilter(f store.InboxFilter, first int) (string, []any) {
	where, args := sqlstore.InboxFilterSQL(f, sqlstore.QuestionMark, first)
	return where, sqlstore.TimesAs(args, microsArg)
}

// InboxList implements store.InboxAdmin.
func (s *Store) InboxList(ctx context.Context, f store.InboxFilter) ([]store.InboxRow, error) {
	where, args := inboxFilter(f, 1)
	return sqlinbox.List[microTime](ctx, s.db, "sqlite", s.inboxTable(), where, args, f)
}

// microTime scans a timestamp stored as microseconds since the epoch.
type microTime struct{ sql.NullInt64 }

// Time implements sqlinbox.Timestamp.
func (m *microTime) Time() (time.Time, bool) { return fromMicros(m.Int64), m.Valid }

// InboxReplay implements store.InboxAdmin: DEAD rows only, and never a
// parked undecodable message.
func (s *Store) InboxReplay(ctx context.Context, f store.InboxFilter) (int64, error) {
	f.Status = txbox.StatusDead
	where, args := inboxFilter(f, 2)
	q, args := sqlinbox.Replay(s.inboxTable(), where, sqlstore.QuestionMark, args)
	return s.exec(ctx, "inbox replay", q, args...)
}

// InboxCleanupBatch implements store.InboxAdmin: one short write
// transaction, so consumers get the write lock between batches.
func (s *Store) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.exec(ctx, "inbox cleanup", s.q.inboxCleanup, micros(time.Now().Add(-age)), limit)
}

// InboxCounts implements store.InboxAdmin.
func (s *Store) InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error) {
	return sqlinbox.Counts(ctx, s.db, "sqlite", s.inboxTable())
}

// nullMicros stores a zero time as NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

var (
	_ store.InboxDialect = inboxDialect{}
	_ store.InboxAdmin   = (*Store)(nil)
)
