// Package store defines what the relay, the inbox and the admin commands need
// from a database, and nothing about any one database. Each dialect lives in
// its own package (postgres, mysql, sqlite) and proves itself against the
// shared conformance suite in storetest.
package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
)

// Record is one outbox row as the relay and the admin commands see it.
// Payload and Headers are the stored bytes: a foreign producer may have
// written anything, so decoding happens in Event, where a failure can send the
// row to DEAD instead of stopping the relay.
type Record struct {
	ID               int64 // outbox sequence; per-aggregate order is id order
	EventID          string
	AggregateType    string
	AggregateID      string
	AggregateVersion int64
	EventType        string
	Payload          []byte
	Headers          []byte
	Status           txbox.Status
	RetryCount       int
	NextRetryAt      *time.Time
	LockedBy         string
	LockedUntil      *time.Time
	OccurredAt       time.Time
	CreatedAt        time.Time
	SentAt           *time.Time
	LastError        string
}

// Event decodes the row into the envelope. An error means the row can never
// be delivered as it is; it wraps txbox.ErrPermanent.
func (r Record) Event() (txbox.Event, error) {
	e := txbox.Event{
		ID:               r.EventID,
		Type:             r.EventType,
		AggregateType:    r.AggregateType,
		AggregateID:      r.AggregateID,
		AggregateVersion: r.AggregateVersion,
		OccurredAt:       r.OccurredAt,
		Payload:          json.RawMessage(r.Payload),
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = r.CreatedAt
	}
	if len(r.Headers) > 0 && string(r.Headers) != "null" {
		// json.Unmarshal would quietly turn bad bytes into U+FFFD.
		if !utf8.Valid(r.Headers) {
			return e, txbox.Permanent(fmt.Errorf("%w: headers are not valid UTF-8", txbox.ErrInvalidEvent))
		}
		h, err := decodeHeaders(r.Headers)
		if err != nil {
			return e, txbox.Permanent(fmt.Errorf("%w: headers are not a JSON object of strings: %v", txbox.ErrInvalidEvent, err))
		}
		e.Headers = h
	}
	if err := e.Validate(); err != nil {
		return e, txbox.Permanent(err)
	}
	// Stores that keep any bytes (SQLite) may hand back text no consumer's
	// inbox could record; the row is refused here, with the reason.
	if err := CheckText(e); err != nil {
		return e, err
	}
	return e, nil
}

// ClaimRequest asks for up to Limit deliverable rows, leased to Lease until
// now + LeaseFor (database clock).
type ClaimRequest struct {
	Lease    string        // fencing token stored in locked_by; unique per claim
	Limit    int           // rows at most
	LeaseFor time.Duration // lease length
}

// Failure is the outcome of one failed publish.
type Failure struct {
	ID    int64
	Error string        // stored in last_error (truncated by the store)
	Dead  bool          // true: straight to DEAD; false: RETRY after Delay
	Delay time.Duration // from now, database clock
	// Outage: the way out failed, not the row (the broker unreachable, no
	// stream for its subject): RETRY after Delay with retry_count left as
	// it is, so an outage of any length spends none of the row's attempts.
	// Dead must be false.
	Outage bool
}

// Spends is the attempts the failure adds to retry_count: 0 for an outage,
// else 1.
func (f Failure) Spends() int32 {
	if f.Outage {
		return 0
	}
	return 1
}

// Stats is the outbox at a glance.
type Stats struct {
	Counts        map[txbox.Status]int64 `json:"counts"`
	OldestPending *time.Time             `json:"oldest_pending,omitempty"` // created_at of the oldest PENDING/RETRY/PROCESSING row
	OldestAge     time.Duration          `json:"oldest_pending_age_ns"`    // now - OldestPending, database clock
	Dead          int64                  `json:"dead"`
}

// Filter selects outbox rows for the admin commands. Zero fields match all.
type Filter struct {
	Status        txbox.Status // DEAD for the dead-letter commands
	EventIDs      []string
	AggregateType string
	AggregateID   string
	EventType     string
	Since, Until  time.Time // created_at range, [Since, Until)
	Limit         int       // 0: store default
	// ErrorContains matches rows whose last_error contains the text,
	// ignoring case.
	ErrorContains string
	// AfterID and BeforeID bound the id range (id > AfterID, id < BeforeID;
	// 0: no bound): keyset paging that costs the same on the thousandth page
	// as on the first, and the ceiling that keeps a bulk action to the rows
	// an operator counted.
	AfterID, BeforeID int64
	// Desc makes List return the highest ids first.
	Desc bool
}

// Outbox is the store side of the relay and of the admin commands.
//
// Claim contract (what storetest proves for every dialect):
//   - a row is deliverable when it is PENDING, RETRY with next_retry_at due,
//     or PROCESSING with an expired lease;
//   - per aggregate (aggregate_type, aggregate_id) only a prefix of the
//     unsent rows in id order is returned, and only when no earlier unsent
//     row of that aggregate is held by another lease or waits in RETRY. DEAD
//     rows do not block their aggregate;
//   - concurrent claimers never receive the same row;
//   - returned rows are PROCESSING with locked_by = Lease, sorted by id.
//
// Every mark is fenced: it changes only rows that are PROCESSING with
// locked_by = lease, and returns how many it changed.
type Outbox interface {
	Claim(ctx context.Context, req ClaimRequest) ([]Record, error)
	MarkSent(ctx context.Context, lease string, ids []int64) (int64, error)
	MarkFailed(ctx context.Context, lease string, failures []Failure) (int64, error)
	Release(ctx context.Context, lease string, ids []int64) (int64, error)

	Stats(ctx context.Context) (Stats, error)
	List(ctx context.Context, f Filter) ([]Record, error)
	// Replay puts matching DEAD rows back to PENDING with a fresh attempt
	// budget; the event id is kept so consumers can still dedupe.
	Replay(ctx context.Context, f Filter) (int64, error)
	// Purge deletes matching DEAD rows.
	Purge(ctx context.Context, f Filter) (int64, error)
	// Count counts the rows List would return without a limit.
	Count(ctx context.Context, f Filter) (int64, error)
	// CleanupBatch deletes at most limit SENT rows older than age (database
	// clock) and returns how many it deleted: fewer than limit means none is
	// left. The loop over batches is the function Cleanup in this package.
	CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
}

// Store is one database: migrations, the outbox side and lifecycle.
type Store interface {
	Outbox
	Dialect() Dialect
	Tables() Tables
	Migrate(ctx context.Context) error
	Ping(ctx context.Context) error
	Close() error
}

// Tx is the least of a transaction that txbox needs. Adapters for *sql.Tx and
// pgx.Tx live in this package (SQLTx) and in package pgxtx.
type Tx interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is what QueryRow returns: *sql.Row and pgx.Row both fit.
type Row interface {
	Scan(dest ...any) error
}

// Dialect writes SQL for one database. The outbox writer and the inbox use
// it inside the caller's transaction, so they need no connection of their own.
type Dialect interface {
	Name() string
	// InsertEvents writes the events in one multi-row INSERT.
	InsertEvents(ctx context.Context, tx Tx, events []txbox.Event) error
}

// Preparer is a Dialect that can check its configuration (table names) and
// build its INSERT text once, instead of on every InsertEvents call.
// outbox.NewWriter prepares the dialect it is given; the returned Dialect
// also has every optional method of the original (Notify, the inbox SQL).
type Preparer interface {
	Prepare() (Dialect, error)
}

// MessageEmitter is a Dialect that can write events into the database's
// change log instead of the outbox table (PostgreSQL: logical decoding
// messages), for a relay that reads that log (change data capture). Each
// event still gets an outbox id from the store, so it can be recorded (as
// DEAD, say) and deduplicated like a row.
type MessageEmitter interface {
	EmitEvents(ctx context.Context, tx Tx, events []txbox.Event) error
}
