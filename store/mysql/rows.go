package mysql

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// recordCols are the columns of both tables, in scanRecord's order.
const recordCols = `id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload, headers, status, retry_count, next_retry_at, locked_by, locked_until,
	occurred_at, created_at, sent_at, last_error`

// timeLayout is how timestamps are passed as parameters: UTC wall clock,
// microseconds, independent of the driver's loc.
const timeLayout = "2006-01-02 15:04:05.000000"

func sqlTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func timeArg(t time.Time) any { return sqlTime(t) }

// filter builds the WHERE clause for f; timestamps become UTC text.
func filter(f store.Filter) (string, []any) {
	where, args := sqlstore.FilterSQL(f, sqlstore.QuestionMark, 1)
	return where, sqlstore.TimesAs(args, timeArg)
}

// utcTime scans a DATETIME as UTC whatever the driver settings: with
// parseTime it arrives as time.Time in the driver's loc (its wall clock is
// the stored UTC value); without, as text.
type utcTime struct {
	t     time.Time
	valid bool
}

func (u *utcTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		u.valid = false
		return nil
	case time.Time:
		u.t = time.Date(x.Year(), x.Month(), x.Day(), x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC)
	case []byte:
		return u.parse(string(x))
	case string:
		return u.parse(x)
	default:
		return fmt.Errorf("mysql: cannot scan %T into a timestamp", v)
	}
	u.valid = true
	return nil
}

func (u *utcTime) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("mysql: timestamp %q: %w", s, err)
	}
	u.t, u.valid = t, true
	return nil
}

// Time implements sqlinbox.Timestamp.
func (u *utcTime) Time() (time.Time, bool) { return u.t, u.valid }

func (u utcTime) ptr() *time.Time {
	if !u.valid {
		return nil
	}
	t := u.t
	return &t
}

// scanRecord reads recordCols, then extra destinations.
func scanRecord(row interface{ Scan(...any) error }, extra ...any) (store.Record, error) {
	var r store.Record
	var status string
	var lockedBy, lastErr sql.NullString
	var next, until, occurred, created, sent utcTime
	dest := append([]any{&r.ID, &r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion, &r.EventType,
		&r.Payload, &r.Headers, &status, &r.RetryCount, &next, &lockedBy, &until,
		&occurred, &created, &sent, &lastErr}, extra...)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.Status = txbox.Status(status)
	r.NextRetryAt, r.LockedUntil, r.SentAt = next.ptr(), until.ptr(), sent.ptr()
	r.OccurredAt, r.CreatedAt = occurred.t, created.t
	r.LockedBy, r.LastError = lockedBy.String, lastErr.String
	return r, nil
}

func collect(rows *sql.Rows) ([]store.Record, error) {
	defer rows.Close()
	return sqlstore.Collect(rows, func(row interface{ Scan(...any) error }) (store.Record, error) { return scanRecord(row) })
}

// inList renders "?, ?, ?" for n values and appends them to args.
func inList[T any](vals []T, args []any) (string, []any) {
	var b strings.Builder
	b.Grow(3 * len(vals))
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		args = append(args, v)
	}
	return b.String(), args
}
