package mysql

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

// The inbox transaction's SQL. Everything runs on the consumer's own
// transaction (a *sql.Tx wrapped by store.SQLTx), whatever its isolation
// level and driver settings.
//
// Dedupe is INSERT ... ON DUPLICATE KEY UPDATE, never a duplicate-key error,
// and never INSERT IGNORE:
//
//   - IGNORE downgrades far more than the duplicate key to a warning: a
//     too-long or badly encoded id would be cut or mangled and stored, and
//     two different events could then share one inbox key.
//   - On a duplicate, INSERT IGNORE takes a shared lock on the existing row
//     and the SELECT ... FOR UPDATE that follows must upgrade it. When two
//     redeliveries wait behind a first delivery that commits, both hold the
//     shared lock and both upgrade: InnoDB kills one as a deadlock victim.
//     ON DUPLICATE KEY UPDATE takes the exclusive lock at once, so the
//     waiters queue and each then finds the row processed. (When the first
//     delivery rolls back instead, two or more waiters can still deadlock
//     on re-inserting the vanished row: InnoDB's duplicate-check gap locks do
//     that for any insert, at any isolation level. The victim's delivery
//     fails and is redelivered, which then is a duplicate or a retry.)
//
// Rows affected is not trusted on its own either: with the driver's
// clientFoundRows=true (CLIENT_FOUND_ROWS; an application's pool may set it),
// an ON DUPLICATE KEY UPDATE that leaves an existing row as it was reports 1,
// the same as an insert. So each upsert is followed by a locking read of the
// row, and the decision rests on what is there plus the one count that is
// unambiguous in both modes: 2, an existing row changed.
//
// In ON DUPLICATE KEY UPDATE (as in a single-table UPDATE) MySQL evaluates
// the assignments left to right, each seeing the columns already assigned;
// MariaDB can be told to evaluate them simultaneously. Every upsert here is
// written so both orders give the same row (see InboxFail).

// inboxSQL is the inbox statements of each Dialect's tables
// (queries/inbox_*.sql, version_*.sql).
var inboxSQL = sqlinbox.Statements(newInboxQueries, nil)

// inbox returns the inbox statements for d's tables.
func (d Dialect) inbox() (inboxQueries, error) { return inboxSQL.Get(d.Tables) }

// field is a value bound for a VARCHAR column; key marks a primary key part.
type field struct {
	name, v string
	max     int
	key     bool
}

// checkFields rejects a value that its column would not keep exactly. In
// strict mode the server refuses it anyway; in a non-strict session it would
// silently cut it or replace bytes, and an inbox key must never be changed
// (the locking read after each upsert, by the full key, would also fail).
// A key must not end in a space either: utf8mb4_bin is a PAD SPACE
// collation on both MySQL 8 and MariaDB, so "a" and "a " are one key, and
// event "a " would be taken for a duplicate of event "a".
func checkFields(fs ...field) error {
	for _, f := range fs {
		switch {
		case !utf8.ValidString(f.v):
			return fmt.Errorf("mysql: inbox: %s is not valid UTF-8", f.name)
		case utf8.RuneCountInString(f.v) > f.max:
			return fmt.Errorf("mysql: inbox: %s has %d characters, at most %d fit", f.name, utf8.RuneCountInString(f.v), f.max)
		case f.key && strings.HasSuffix(f.v, " "):
			return fmt.Errorf("mysql: inbox: %s %q ends in a space, which MySQL's key comparison ignores", f.name, f.v)
		}
	}
	return nil
}

// checkEvent checks the consumer name, then the event. A field of the event
// that cannot be kept wraps txbox.ErrInvalidEvent: it will be refused on
// every redelivery, so the consumer parks the event instead.
func checkEvent(consumer string, e txbox.Event) error {
	if err := checkFields(field{"consumer name", consumer, 128, true}); err != nil {
		return err
	}
	if err := checkFields(field{"event id", e.ID, 64, true}, field{"event type", e.Type, 128, false},
		field{"aggregate type", e.AggregateType, 64, false}, field{"aggregate id", e.AggregateID, 128, false}); err != nil {
		return fmt.Errorf("%w: %w", txbox.ErrInvalidEvent, err)
	}
	return nil
}

// inboxDialect is the store's inbox SQL (store.InboxDialect, reached
// through InboxDialect): Dialect, the writer's, is the outbox's alone.
type inboxDialect struct{ Dialect }

// InboxAcquire implements store.InboxDialect. The upsert inserts the row
// (first delivery) or takes an exclusive lock on the existing one, turning a
// RETRY or REPLAY row into PROCESSING on the way; a concurrent delivery of
// the same event waits on that lock until the first transaction ends. The
// locking read then says which case it was.
func (d inboxDialect) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, 0, err
	}
	if err := checkEvent(consumer, e); err != nil {
		return 0, 0, err
	}
	n, err := tx.Exec(ctx, q.inboxAcquire, e.ID, consumer, e.Type, e.AggregateType, e.AggregateID, e.AggregateVersion, nullTime(e.OccurredAt))
	if err != nil {
		return 0, 0, fmt.Errorf("mysql: inbox insert: %w", err)
	}
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, q.inboxLookup, e.ID, consumer).Scan(&status, &attempts); err != nil {
		return 0, 0, fmt.Errorf("mysql: inbox lookup: %w", err)
	}
	if state, ok := sqlinbox.Existing(status); ok {
		return state, attempts, nil
	}
	switch txbox.Status(status) {
	case txbox.StatusProcessing:
		if n == 1 {
			// Inserted. (With clientFoundRows a committed PROCESSING row,
			// which the consumer never leaves behind, also reads 1; it is run
			// either way, only reported as fresh.)
			return store.InboxFresh, attempts, nil
		}
		// 2: a RETRY or REPLAY row taken over; 0: a committed PROCESSING row.
		return store.InboxRetry, attempts, nil
	}
	return 0, 0, fmt.Errorf("mysql: inbox lookup: unexpected status %q", status)
}

// InboxDone implements store.InboxDialect.
func (d inboxDialect) InboxDone(ctx context.Context, tx store.Tx, consumer, eventID string, status txbox.Status, note string) error {
	q, err := d.inbox()
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, q.inboxDone, string(status), sqlinbox.Note(errorText(note)), eventID, consumer)
	if err != nil {
		return fmt.Errorf("mysql: inbox done: %w", err)
	}
	return nil
}

// InboxFail implements store.InboxDialect with one upsert
// (queries/inbox_fail.sql, which says why it gives the same row under
// either evaluation order) and a locking read.
func (d inboxDialect) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (int, bool, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	if err := sqlinbox.CheckAgain("mysql", again); err != nil {
		return 0, false, err
	}
	if err := checkEvent(consumer, e); err != nil {
		return 0, false, err
	}
	msg, occurred, headers, payload := errorText(errMsg), nullTime(e.OccurredAt), sqlstore.EncodeHeaders(e.Headers), string(e.Payload)
	_, err = tx.Exec(ctx, q.inboxFail,
		e.ID, consumer, e.Type, maxAttempts, string(again), msg, e.AggregateType, e.AggregateID, e.AggregateVersion, occurred, headers, payload,
		maxAttempts, string(again),
		msg, e.AggregateType, e.AggregateID, e.AggregateVersion, occurred, headers, payload)
	if err != nil {
		return 0, false, fmt.Errorf("mysql: inbox fail: %w", err)
	}
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, q.inboxLookup, e.ID, consumer).Scan(&status, &attempts); err != nil {
		return 0, false, fmt.Errorf("mysql: inbox fail: %w", err)
	}
	switch txbox.Status(status) {
	case txbox.StatusProcessed, txbox.StatusSkipped:
		return 0, false, nil // processed meanwhile by another delivery
	}
	return attempts, status == string(txbox.StatusDead), nil
}

// unapplied is the version a guard row is created with, below any version:
// the UPDATE that follows always raises it, in the same transaction.
const unapplied = math.MinInt64

// InboxVersion implements store.InboxDialect: an upsert makes sure the
// aggregate's row exists and is locked (queries/version_guard.sql), then a
// check-and-set UPDATE raises it (version_raise.sql); the files say why
// each is written so.
func (d inboxDialect) InboxVersion(ctx context.Context, tx store.Tx, consumer, aggType, aggID string, version int64) (int64, bool, error) {
	q, err := d.inbox()
	if err != nil {
		return 0, false, err
	}
	if err := checkFields(field{"consumer name", consumer, 128, true}); err != nil {
		return 0, false, err
	}
	if err := checkFields(field{"aggregate type", aggType, 64, true}, field{"aggregate id", aggID, 128, true}); err != nil {
		return 0, false, fmt.Errorf("%w: %w", txbox.ErrInvalidEvent, err)
	}
	if _, err := tx.Exec(ctx, q.versionGuard, consumer, aggType, aggID, int64(unapplied)); err != nil {
		return 0, false, fmt.Errorf("mysql: version guard: %w", err)
	}
	n, err := tx.Exec(ctx, q.versionRaise, version, consumer, aggType, aggID, version)
	if err != nil {
		return 0, false, fmt.Errorf("mysql: version guard: %w", err)
	}
	if n == 1 {
		return version, true, nil
	}
	var last int64
	if err := tx.QueryRow(ctx, q.versionRead, consumer, aggType, aggID).Scan(&last); err != nil {
		return 0, false, fmt.Errorf("mysql: version guard: %w", err)
	}
	return last, false, nil
}

// errorText is what fits error_message (TEXT, utf8mb4): valid UTF-8, at
// most 2000 bytes.
func errorText(s string) string {
	return sqlstore.Truncate(strings.ToValidUTF8(s, "\uFFFD"), 2000)
}

// nullTime passes a zero time, or one DATETIME cannot hold, as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() || t.UTC().Year() < 1000 || t.UTC().Year() > 9999 {
		return nil
	}
	return sqlTime(t)
}

// Admin side, on the store's pool.

func (s *Store) inboxTable() string { return s.tables.Qualified(s.tables.Inbox) } // validated by New

// inboxFilter builds the WHERE clause for f; timestamps become UTC text.
func inboxFilter(f store.InboxFilter) (string, []any) {
	where, args := sqlstore.InboxFilterSQL(f, sqlstore.QuestionMark, 1)
	return where, sqlstore.TimesAs(args, timeArg)
}

// InboxList implements store.InboxAdmin.
func (s *Store) InboxList(ctx context.Context, f store.InboxFilter) ([]store.InboxRow, error) {
	where, args := inboxFilter(f)
	return sqlinbox.List[utcTime](ctx, s.db, "mysql", s.inboxTable(), where, args, f)
}

// InboxReplay implements store.InboxAdmin: DEAD rows only, and never a
// parked undecodable message.
func (s *Store) InboxReplay(ctx context.Context, f store.InboxFilter) (int64, error) {
	f.Status = txbox.StatusDead
	where, args := inboxFilter(f)
	q, args := sqlinbox.Replay(s.inboxTable(), where, sqlstore.QuestionMark, args)
	n, err := s.exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: inbox replay: %w", err)
	}
	return n, nil
}

// InboxCleanupBatch implements store.InboxAdmin: per finished status, the
// oldest rows first along cleanup_idx, each statement its own READ
// COMMITTED transaction (no gap locks in consumers' way).
func (s *Store) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.inboxCleanupBatch(ctx, s.db, age, limit)
}

func (s *Store) inboxCleanupBatch(ctx context.Context, on beginner, age time.Duration, limit int) (int64, error) {
	var total int64
	for _, status := range []txbox.Status{txbox.StatusProcessed, txbox.StatusSkipped} {
		n, err := execOn(ctx, on, s.q.inboxCleanup, string(status), age.Microseconds(), limit-int(total))
		total += n
		if err != nil {
			return total, fmt.Errorf("mysql: inbox cleanup: %w", err)
		}
		if total >= int64(limit) {
			break
		}
	}
	return total, nil
}

// InboxCounts implements store.InboxAdmin.
func (s *Store) InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error) {
	return sqlinbox.Counts(ctx, s.db, "mysql", s.inboxTable())
}

var (
	_ store.InboxDialect = inboxDialect{}
	_ store.InboxAdmin   = (*Store)(nil)
)
