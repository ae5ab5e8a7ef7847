package sqlinbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqladmin"
)

// Cols are the columns InboxList reads, in ScanList's order.
const Cols = `event_id, consumer_name, event_type, status, received_at, processed_at, retry_count, error_message,
	aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload`

// DefaultListLimit is how many rows InboxList returns when the filter
// names no limit.
const DefaultListLimit = 100

// Rows is what *sql.Rows and pgx.Rows have in common.
type Rows = sqladmin.Rows

// Timestamp is a scan destination for one timestamp column: each store
// keeps times its own way (DATETIME text, microseconds since the epoch).
type Timestamp interface {
	sql.Scanner
	// Time is the value read; false for NULL.
	Time() (time.Time, bool)
}

// List is InboxList on a database/sql pool: ListQuery over table with
// where and its args, read by ScanList. T is the store's Timestamp.
func List[T any, PT interface {
	*T
	Timestamp
}](ctx context.Context, db *sql.DB, dialect, table, where string, args []any, f store.InboxFilter) ([]store.InboxRow, error) {
	rows, err := db.QueryContext(ctx, ListQuery(table, where, f), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: inbox list: %w", dialect, err)
	}
	defer rows.Close()
	out, err := ScanList[T, PT](rows)
	if err != nil {
		return nil, fmt.Errorf("%s: inbox list: %w", dialect, err)
	}
	return out, nil
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
