package store

import (
	"context"
	"time"

	"github.com/txbox/txbox"
)

// InboxState is what acquiring an inbox row found.
type InboxState int

const (
	// InboxFresh: first delivery; the row was inserted.
	InboxFresh InboxState = iota
	// InboxRetry: an earlier attempt failed (or an operator asked for a
	// replay); this attempt may run. The row is locked by the transaction.
	InboxRetry
	// InboxDuplicate: already processed or skipped; acknowledge and skip.
	InboxDuplicate
	// InboxParked: DEAD; acknowledge and skip until an operator replays it.
	InboxParked
)

func (s InboxState) String() string {
	return [...]string{"fresh", "retry", "duplicate", "parked"}[s]
}

// InboxDialect is the SQL the inbox runs inside the consumer's own
// transactions. Dedupe is the dialect's native insert-if-absent: the number
// of rows inserted decides first delivery; no error is used as a signal.
type InboxDialect interface {
	Dialect
	// InboxAcquire inserts the (event, consumer) row if absent, with status
	// PROCESSING. When the row exists it locks it and reports its state; a
	// RETRY or REPLAY row is set to PROCESSING. attempts is how many
	// attempts failed before this one. An error wrapping
	// txbox.ErrInvalidEvent means this store can never record the event
	// (the consumer parks it); any other error is retried.
	InboxAcquire(ctx context.Context, tx Tx, consumer string, e txbox.Event) (state InboxState, attempts int, err error)
	// InboxDone marks the row PROCESSED, or SKIPPED with a note (stale
	// version), in the handler's transaction.
	InboxDone(ctx context.Context, tx Tx, consumer, eventID string, status txbox.Status, note string) error
	// InboxFail records a failed attempt, in a transaction of its own after
	// the handler's rolled back: retry_count+1, the error, and the event
	// itself so a parked event can be replayed. The row is DEAD (parked)
	// once retry_count reaches maxAttempts, and `again` before: RETRY when
	// the broker will redeliver, REPLAY when the inbox itself must run it
	// again (a replayed event whose broker message is long acknowledged).
	InboxFail(ctx context.Context, tx Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (attempts int, parked bool, err error)
	// InboxVersion is the version guard's check-and-set: when version is
	// above the last applied one for the aggregate it records it and
	// returns ok; otherwise it changes nothing and returns the last one.
	// Errors about the aggregate's data wrap txbox.ErrInvalidEvent, as for
	// InboxAcquire.
	InboxVersion(ctx context.Context, tx Tx, consumer, aggType, aggID string, version int64) (last int64, ok bool, err error)
}

// InboxRow is one inbox row as operators see it.
type InboxRow struct {
	EventID      string
	ConsumerName string
	EventType    string
	Status       txbox.Status
	ReceivedAt   time.Time
	ProcessedAt  *time.Time
	RetryCount   int
	ErrorMessage string
	// Event is the stored envelope of an unprocessed row (nil Payload once
	// processed: the inbox keeps the id, not the data).
	Event txbox.Event
}

// InboxFilter selects inbox rows. Zero fields match all.
type InboxFilter struct {
	Consumer     string
	Status       txbox.Status
	EventIDs     []string
	Since, Until time.Time // received_at range
	Limit        int
}

// InboxAdmin is the operators' and the consumer's view of the inbox table.
type InboxAdmin interface {
	InboxList(ctx context.Context, f InboxFilter) ([]InboxRow, error)
	// InboxReplay turns matching DEAD rows into REPLAY with a fresh
	// attempt budget; the running consumer picks them up.
	InboxReplay(ctx context.Context, f InboxFilter) (int64, error)
	// InboxCleanupBatch deletes at most limit PROCESSED and SKIPPED rows
	// received before now-age and returns how many it deleted: fewer than
	// limit means none is left. The loop is the function InboxCleanup.
	InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
	// InboxCounts counts rows per consumer and status.
	InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error)
}

// UndecodableType is the event type under which a message that could not
// be decoded is parked; such rows are kept for inspection, never replayed.
const UndecodableType = "txbox.undecodable"

// Optional fast paths of an InboxDialect. The inbox uses each one when the
// dialect has it (PostgreSQL has both), and storetest.RunInbox checks it on
// every store that does.

// InboxProcessedAcquirer writes the inbox row PROCESSED in the statement
// that claims it (InboxAcquire and InboxDone in one), so that a first
// delivery whose handler succeeds costs one inbox statement. States and
// attempts are those of InboxAcquire; a RETRY or REPLAY row becomes
// PROCESSED, its stored event cleared. The caller rolls the transaction (or
// its savepoint) back when the handler fails, and calls InboxDone for any
// other outcome (SKIPPED for a stale version).
type InboxProcessedAcquirer interface {
	InboxAcquireProcessed(ctx context.Context, tx Tx, consumer string, e txbox.Event) (state InboxState, attempts int, err error)
}

// InboxBatchInserter is the first step of InboxAcquireProcessed for many
// events in one statement, at the start of a transaction shared by a batch
// of deliveries.
type InboxBatchInserter interface {
	// InboxInsertProcessed inserts, PROCESSED, the rows of the events that
	// have none, and reports which it inserted (of an event given twice,
	// the first). The others go through InboxAcquire(Processed) one by one.
	InboxInsertProcessed(ctx context.Context, tx Tx, consumer string, evs []txbox.Event) (fresh []bool, err error)
	// InboxForget deletes rows InboxInsertProcessed inserted in this
	// transaction for events that were not applied after all (a savepoint
	// taken after the insert does not undo it).
	InboxForget(ctx context.Context, tx Tx, consumer string, eventIDs []string) error
}
