package store

import (
	"context"
	"strings"
	"time"

	"github.com/txbox/txbox"
)

// Blocking dead letters (relay.Config.DeadBlocks, `txbox relay
// --dead-blocks`): for the aggregate types an operator names, a DEAD event
// holds back every later event of its aggregate until it is replayed or
// purged, where by default a DEAD event does not block its aggregate.
//
// A held row is an unsent row parked in RETRY for centuries: every claim
// already treats a RETRY row that is not due as the end of its aggregate's
// run, in every store and claim mode and across relays, so a held row also
// holds back the rows behind it, including rows written later. The relay
// holds a row with an ordinary failure mark (an outage's, which spends no
// attempt) of delay HoldFor; a row is held when its next_retry_at is at or
// after HeldAfter. (A time.Duration reaches no further than 292 years.)

// HoldFor is the delay of the relay's hold mark.
const HoldFor = 250 * 365 * 24 * time.Hour

// HeldAfter is where held rows begin: a RETRY row due at or after it is
// held, not waiting for an ordinary retry. The stores' statements and
// partial indexes spell it out.
var HeldAfter = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// HoldReason is the last_error of a row held behind the DEAD event
// deadEventID.
func HoldReason(deadEventID string) string {
	return holdPrefix + deadEventID + holdSuffix
}

const (
	holdPrefix = "held: the earlier event "
	holdSuffix = " of this aggregate is DEAD and its type blocks (--dead-blocks); replay or purge it to release this one"
)

// HeldBehind is the DEAD event a held row's last_error names (HoldReason);
// ok is false for any other text.
func HeldBehind(lastError string) (deadEventID string, ok bool) {
	rest, ok := strings.CutPrefix(lastError, holdPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, holdSuffix)
}

// HeldFilter selects the held rows' kind (RETRY, with a HoldReason) for
// Outbox.List, to show what is blocked.
func HeldFilter(limit int) Filter {
	return Filter{Status: txbox.StatusRetry, ErrorContains: holdPrefix, Limit: limit}
}

// AggregateRow names a row of an aggregate: the relay asks what lies before
// it (DeadBlocker.Ahead).
type AggregateRow struct {
	AggregateType, AggregateID string
	ID                         int64
}

// Ahead is a row of an aggregate below an AggregateRow that is not
// delivered: the first DEAD one, or else the first unsent one.
type Ahead struct {
	AggregateType, AggregateID string
	ID                         int64
	EventID                    string
	Dead                       bool
}

// Blocked is how many aggregates have rows held behind a DEAD one, how
// many unsent rows they hold back (the held ones and every later one), and
// the age of the oldest held row (now - created_at).
type Blocked struct {
	Aggregates int64
	Rows       int64
	OldestAge  time.Duration
}

// DeadBlocker is an Outbox that supports blocking dead letters. Replay and
// Purge of such a store release, in the same transaction, the held rows of
// the aggregates they touch that then lie behind no DEAD row (and a store
// that gives a replayed row a new id gives the unsent rows behind it in its
// aggregate new ids after it, so it stays first).
type DeadBlocker interface {
	// Ahead returns, for each of rows, the first DEAD row of its
	// aggregate below it, or else the first unsent one; rows without
	// either have no entry.
	Ahead(ctx context.Context, rows []AggregateRow) ([]Ahead, error)
	// ReleaseHeld puts back to PENDING (retry_count kept) every held row
	// behind no DEAD row of a type that blocks (all types when all is set,
	// else those in types) and returns how many it released.
	ReleaseHeld(ctx context.Context, all bool, types []string) (int64, error)
	// Blocked samples the held rows, cheaply enough to run with the
	// backlog sample.
	Blocked(ctx context.Context) (Blocked, error)
}
