// Package sqlinbox is the inbox SQL the database/sql stores (MySQL and
// SQLite) share with each other, and the admin side with PostgreSQL: the
// row shape operators list, the counts, the replay statement and what an
// existing row's status means. Each store keeps what differs: upserts,
// locking, and how it stores a timestamp.
package sqlinbox

import (
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Cols are the columns InboxList reads, in ScanList's order.
const Cols = `event_id, consumer_name, event_type, status, received_at, processed_at, retry_count, error_message,
	aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload`

// DefaultListLimit is how many rows InboxList returns when the filter
// names no limit.
const DefaultListLimit = 100

// Rows is what *sql.Rows and pgx.Rows have in common.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ListQuery is the SELECT of InboxList over table, where (the dialect's
// filter) and f's limit.
func ListQuery(table, where string, f store.InboxFilter) string {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return `SELECT ` + Cols + ` FROM ` + table + ` WHERE ` + where +
		` ORDER BY received_at, event_id, consumer_name LIMIT ` + strconv.Itoa(limit)
}

// Timestamp is a scan destination for one timestamp column: each store
// keeps times its own way (DATETIME text, microseconds since the epoch).
type Timestamp interface {
	sql.Scanner
	// Time is the value read; false for NULL.
	Time() (time.Time, bool)
}

// ScanList reads the rows of ListQuery. T is the store's Timestamp.
func ScanList[T any, PT interface {
	*T
	Timestamp
}](rows Rows) ([]store.InboxRow, error) {
	var out []store.InboxRow
	for rows.Next() {
		var r store.InboxRow
		var status string
		var received, processed, occurred T
		var errMsg, aggType, aggID, headers, payload sql.NullString
		if err := rows.Scan(&r.EventID, &r.ConsumerName, &r.EventType, &status, PT(&received), PT(&processed), &r.RetryCount, &errMsg,
			&aggType, &aggID, &r.Event.AggregateVersion, PT(&occurred), &headers, &payload); err != nil {
			return nil, err
		}
		r.Status = txbox.Status(status)
		r.ReceivedAt, _ = PT(&received).Time()
		if t, ok := PT(&processed).Time(); ok {
			r.ProcessedAt = &t
		}
		r.ErrorMessage = errMsg.String
		r.Event.ID, r.Event.Type = r.EventID, r.EventType
		r.Event.AggregateType, r.Event.AggregateID = aggType.String, aggID.String
		if t, ok := PT(&occurred).Time(); ok {
			r.Event.OccurredAt = t
		}
		if headers.Valid {
			r.Event.Headers = sqlstore.DecodeHeaders(&headers.String)
		}
		if payload.Valid {
			r.Event.Payload = []byte(payload.String)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CountsQuery is the SELECT of InboxCounts.
func CountsQuery(table string) string {
	return `SELECT consumer_name, status, COUNT(*) FROM ` + table + ` GROUP BY consumer_name, status`
}

// ScanCounts reads the rows of CountsQuery: per consumer, per status.
func ScanCounts(rows Rows) (map[string]map[txbox.Status]int64, error) {
	out := map[string]map[txbox.Status]int64{}
	for rows.Next() {
		var c, st string
		var n int64
		if err := rows.Scan(&c, &st, &n); err != nil {
			return nil, err
		}
		if out[c] == nil {
			out[c] = map[txbox.Status]int64{}
		}
		out[c][txbox.Status(st)] = n
	}
	return out, rows.Err()
}

// Replay is the UPDATE of InboxReplay, with '?' placeholders: the rows
// where selects (numbered from the second placeholder) become REPLAY with a
// fresh attempt budget, never a parked undecodable message. The caller
// makes where select DEAD rows only.
func Replay(table, where string, args []any) (string, []any) {
	return `UPDATE ` + table + ` SET status = 'REPLAY', retry_count = 0 WHERE event_type <> ? AND ` + where,
		append([]any{store.UndecodableType}, args...)
}

// Existing says what an existing row's status means for a delivery of its
// event: PROCESSED or SKIPPED is a duplicate, DEAD is parked; ok is false
// for a row this delivery may run (RETRY, REPLAY, PROCESSING).
func Existing(status string) (state store.InboxState, ok bool) {
	switch txbox.Status(status) {
	case txbox.StatusProcessed, txbox.StatusSkipped:
		return store.InboxDuplicate, true
	case txbox.StatusDead:
		return store.InboxParked, true
	}
	return 0, false
}

// CheckAgain refuses a status InboxFail must not set.
func CheckAgain(dialect string, again txbox.Status) error {
	if again != txbox.StatusRetry && again != txbox.StatusReplay {
		return fmt.Errorf("%s: inbox fail: status %q: want RETRY or REPLAY", dialect, again)
	}
	return nil
}

// Note is InboxDone's note as a nullable parameter: NULL keeps the row's
// error_message.
func Note(note string) *string {
	if note == "" {
		return nil
	}
	return &note
}
