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

// inbox returns the inbox table's name, validated: a Dialect may be built
// by hand, and names are pasted into SQL.
func (d Dialect) inbox() (string, error) {
	t, err := sqlstore.Tables(d.Tables)
	if err == nil {
		err = noSchema(t)
	}
	return t.Inbox, err
}

// InboxAcquire implements store.InboxDialect with INSERT ... ON CONFLICT
// (event_id, consumer_name) DO NOTHING: one row inserted means first
// delivery. The conflict target names the primary key, so only a duplicate
// key is absorbed; any other constraint failure is still an error (INSERT OR
// IGNORE would swallow NOT NULL and CHECK failures too).
func (d Dialect) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	t, err := d.inbox()
	if err != nil {
		return 0, 0, err
	}
	n, err := tx.Exec(ctx, `INSERT INTO `+t+` (event_id, consumer_name, event_type, status, received_at,
			aggregate_type, aggregate_id, aggregate_version, occurred_at)
		VALUES (?, ?, ?, 'PROCESSING', ?, ?, ?, ?, ?)
		ON CONFLICT (event_id, consumer_name) DO NOTHING`,
		e.ID, consumer, e.Type, micros(time.Now()), e.AggregateType, e.AggregateID, e.AggregateVersion, nullMicros(e.OccurredAt))
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox insert: %w", err)
	}
	if n == 1 {
		return store.InboxFresh, 0, nil
	}
	// The insert took the write lock: the row cannot change until we commit.
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, `SELECT status, retry_count FROM `+t+` WHERE event_id = ? AND consumer_name = ?`,
		e.ID, consumer).Scan(&status, &attempts); err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox lookup: %w", err)
	}
	if state, ok := sqlinbox.Existing(status); ok {
		return state, attempts, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE `+t+` SET status = 'PROCESSING' WHERE event_id = ? AND consumer_name = ?`, e.ID, consumer); err != nil {
		return 0, 0, fmt.Errorf("sqlite: inbox retry: %w", err)
	}
	return store.InboxRetry, attempts, nil
}

// InboxDone implements store.InboxDialect.
func (d Dialect) InboxDone(ctx context.Context, tx store.Tx, consumer, eventID string, status txbox.Status, note string) error {
	t, err := d.inbox()
	if err != nil {
		return err
	}
	n := sqlinbox.Note(note)
	_, err = tx.Exec(ctx, `UPDATE `+t+` SET status = ?, processed_at = ?, error_message = COALESCE(?, error_message),
		payload = NULL, headers = NULL WHERE event_id = ? AND consumer_name = ?`,
		string(status), micros(time.Now()), n, eventID, consumer)
	if err != nil {
		return fmt.Errorf("sqlite: inbox done: %w", err)
	}
	return nil
}

// InboxFail implements store.InboxDialect with one upsert. In SQLite's
// DO UPDATE every SET expression reads the row as it was (as in any UPDATE),
// so status is computed from the old retry_count + 1; the WHERE leaves a
// PROCESSED or SKIPPED row alone, and then RETURNING yields no row.
func (d Dialect) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (int, bool, error) {
	t, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	if err := sqlinbox.CheckAgain("sqlite", again); err != nil {
		return 0, false, err
	}
	var attempts int
	var status string
	err = tx.QueryRow(ctx, `INSERT INTO `+t+` AS i (event_id, consumer_name, event_type, status, received_at, retry_count,
			error_message, aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload)
		VALUES (?1, ?2, ?3, CASE WHEN 1 >= ?4 THEN 'DEAD' ELSE ?5 END, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
		ON CONFLICT (event_id, consumer_name) DO UPDATE SET
			retry_count = i.retry_count + 1,
			status = CASE WHEN i.retry_count + 1 >= ?4 THEN 'DEAD' ELSE ?5 END,
			error_message = excluded.error_message,
			aggregate_type = excluded.aggregate_type, aggregate_id = excluded.aggregate_id,
			aggregate_version = excluded.aggregate_version, occurred_at = excluded.occurred_at,
			headers = excluded.headers, payload = excluded.payload
		WHERE i.status NOT IN ('PROCESSED', 'SKIPPED')
		RETURNING retry_count, status`,
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
func (d Dialect) InboxVersion(ctx context.Context, tx store.Tx, consumer, aggType, aggID string, version int64) (int64, bool, error) {
	t, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	t += "_versions"
	var v int64
	err = tx.QueryRow(ctx, `INSERT INTO `+t+` AS v (consumer_name, aggregate_type, aggregate_id, version, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
		WHERE v.version < excluded.version
		RETURNING version`, consumer, aggType, aggID, version, micros(time.Now())).Scan(&v)
	if err == nil {
		return v, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: version guard: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT version FROM `+t+` WHERE consumer_name = ? AND aggregate_type = ? AND aggregate_id = ?`,
		consumer, aggType, aggID).Scan(&v); err != nil {
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
	rows, err := s.db.QueryContext(ctx, sqlinbox.ListQuery(s.inboxTable(), where, f), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox list: %w", err)
	}
	defer rows.Close()
	out, err := sqlinbox.ScanList[microTime](rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox list: %w", err)
	}
	return out, nil
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
	q, args := sqlinbox.Replay(s.inboxTable(), where, args)
	return s.exec(ctx, "inbox replay", q, args...)
}

// InboxCleanupBatch implements store.InboxAdmin: one short write
// transaction, so consumers get the write lock between batches.
func (s *Store) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	t := s.inboxTable()
	return s.exec(ctx, "inbox cleanup", `DELETE FROM `+t+` WHERE rowid IN (
		SELECT rowid FROM `+t+` WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < ?
		ORDER BY received_at LIMIT ?)`, micros(time.Now().Add(-age)), limit)
}

// InboxCounts implements store.InboxAdmin.
func (s *Store) InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error) {
	rows, err := s.db.QueryContext(ctx, sqlinbox.CountsQuery(s.inboxTable()))
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox counts: %w", err)
	}
	defer rows.Close()
	out, err := sqlinbox.ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox counts: %w", err)
	}
	return out, nil
}

// nullMicros stores a zero time as NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

var (
	_ store.InboxDialect = Dialect{}
	_ store.InboxAdmin   = (*Store)(nil)
)
