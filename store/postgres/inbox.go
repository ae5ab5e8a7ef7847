package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

// The inbox transaction's SQL (queries/inbox_*.sql, version_*.sql;
// inboxQueries in queries.go). Everything runs on the consumer's tx.

// inboxKey selects one inbox row by its primary key. consumer_name is
// compared through an expression so that no plan can answer it from the
// monitor index (consumer_name, status, received_at): on a table without
// statistics (a fresh inbox, autovacuum off) the planner rates that index
// as cheap as the key for a prepared statement's generic plan, and once
// cached, that plan reads every row of the consumer for each event.
const inboxKey = `event_id = $1 AND consumer_name || '' = $2`

// inboxDialect is the store's inbox SQL (store.InboxDialect, reached
// through InboxDialect): Dialect, the writer's, is the outbox's alone.
type inboxDialect struct{ Dialect }

// InboxAcquire implements store.InboxDialect with ON CONFLICT DO NOTHING:
// one row inserted means first delivery. A concurrent delivery of the same
// event waits on the unique index until the first transaction ends, then
// finds the row.
func (d inboxDialect) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	return d.acquire(ctx, tx, consumer, e, false)
}

// InboxAcquireProcessed is InboxAcquire for a handler that is expected to
// succeed: the row is written PROCESSED (processed_at now(), the stored
// event cleared) by the statement that claims it, so a successful handler
// needs no InboxDone and a first delivery costs one statement. The caller
// rolls the transaction, or its savepoint, back when the handler fails, and
// calls InboxDone for any other outcome (SKIPPED for a stale version).
func (d inboxDialect) InboxAcquireProcessed(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	return d.acquire(ctx, tx, consumer, e, true)
}

func (d Dialect) acquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, processed bool) (store.InboxState, int, error) {
	q := d.inbox()
	insert := q.inboxInsert
	if processed {
		insert = q.inboxInsertProcessed
	}
	n, err := tx.Exec(ctx, insert, e.ID, consumer, e.Type, e.AggregateType, e.AggregateID, e.AggregateVersion, nullTime(e.OccurredAt))
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: inbox insert: %w", err)
	}
	if n == 1 {
		return store.InboxFresh, 0, nil
	}
	return existing(ctx, tx, q, consumer, e.ID, processed)
}

// existing locks the row of an event seen before and reports its state; a
// row to run again (RETRY, REPLAY) is set to PROCESSING, or PROCESSED when
// processed is set.
func existing(ctx context.Context, tx store.Tx, q inboxQueries, consumer, eventID string, processed bool) (store.InboxState, int, error) {
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, q.inboxLookup, eventID, consumer).Scan(&status, &attempts); err != nil {
		return 0, 0, fmt.Errorf("postgres: inbox lookup: %w", err)
	}
	if state, ok := sqlinbox.Existing(status); ok {
		return state, attempts, nil
	}
	retry := q.inboxRetry
	if processed {
		retry = q.inboxRetryProcessed
	}
	if _, err := tx.Exec(ctx, retry, eventID, consumer); err != nil {
		return 0, 0, fmt.Errorf("postgres: inbox retry: %w", err)
	}
	return store.InboxRetry, attempts, nil
}

// InboxInsertProcessed is the first step of InboxAcquireProcessed for many
// events in one statement: it inserts, PROCESSED, the rows of the events
// that have none and reports which ones it inserted (of an event given
// twice, the first). The others have a row already (or come twice) and go
// through InboxAcquireProcessed one by one. A row inserted here for an event
// whose handler then fails must be removed with InboxForget, since a
// savepoint taken after this statement does not undo it.
func (d inboxDialect) InboxInsertProcessed(ctx context.Context, tx store.Tx, consumer string, evs []txbox.Event) ([]bool, error) {
	fresh := make([]bool, len(evs))
	// The rows go in event id order, so that two transactions inserting
	// overlapping batches (a redelivery to a second process) lock the keys
	// in one order and do not deadlock.
	order := make([]int, len(evs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return evs[order[a]].ID < evs[order[b]].ID })
	q := d.inbox()
	for start := 0; start < len(order); start += inboxChunk {
		part := order[start:min(len(order), start+inboxChunk)]
		var rows strings.Builder
		args := make([]any, 0, 1+6*len(part))
		args = append(args, consumer)
		for i, k := range part {
			e := &evs[k]
			if i > 0 {
				rows.WriteString(", ")
			}
			b := len(args)
			fmt.Fprintf(&rows, processedRow, b+1, b+2, b+3, b+4, b+5, b+6)
			args = append(args, e.ID, e.Type, e.AggregateType, e.AggregateID, e.AggregateVersion, nullTime(e.OccurredAt))
		}
		var js string
		if err := tx.QueryRow(ctx, q.inboxInsertBatch.With(rows.String()), args...).Scan(&js); err != nil {
			return nil, fmt.Errorf("postgres: inbox insert: %w", err)
		}
		var ids []string
		if err := json.Unmarshal([]byte(js), &ids); err != nil {
			return nil, fmt.Errorf("postgres: inbox insert: %w", err)
		}
		inserted := make(map[string]bool, len(ids))
		for _, id := range ids {
			inserted[id] = true
		}
		for _, k := range part {
			if id := evs[k].ID; inserted[id] {
				fresh[k] = true
				delete(inserted, id) // a second copy in the batch is not fresh
			}
		}
	}
	return fresh, nil
}

// processedRow is one row of inbox_insert_batch.sql's VALUES: the event's
// id, type, aggregate and time, numbered from the first %d, beside the
// consumer ($1).
const processedRow = "($%d, $1, $%d, 'PROCESSED', now(), $%d, $%d, $%d, $%d)"

// inboxChunk keeps one InboxInsertProcessed statement well under
// PostgreSQL's 65535 parameters.
const inboxChunk = 1000

// InboxForget deletes rows InboxInsertProcessed inserted in this
// transaction for events that were not applied after all.
func (d inboxDialect) InboxForget(ctx context.Context, tx store.Tx, consumer string, eventIDs []string) error {
	q := d.inbox()
	for start := 0; start < len(eventIDs); start += inboxChunk {
		part := eventIDs[start:min(len(eventIDs), start+inboxChunk)]
		var ids strings.Builder
		args := make([]any, 0, 1+len(part))
		args = append(args, consumer)
		for i, id := range part {
			if i > 0 {
				ids.WriteString(", ")
			}
			ids.WriteString(ph(i + 2))
			args = append(args, id)
		}
		if _, err := tx.Exec(ctx, q.inboxForget.With(ids.String()), args...); err != nil {
			return fmt.Errorf("postgres: inbox forget: %w", err)
		}
	}
	return nil
}

func (d inboxDialect) InboxDone(ctx context.Context, tx store.Tx, consumer, eventID string, status txbox.Status, note string) error {
	_, err := tx.Exec(ctx, d.inbox().inboxDone, eventID, consumer, string(status), sqlinbox.Note(note))
	if err != nil {
		return fmt.Errorf("postgres: inbox done: %w", err)
	}
	return nil
}

func (d inboxDialect) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (int, bool, error) {
	var attempts int
	var status string
	err := tx.QueryRow(ctx, d.inbox().inboxFail,
		e.ID, consumer, e.Type, maxAttempts, sqlstore.Truncate(errMsg, 2000), e.AggregateType, e.AggregateID, e.AggregateVersion,
		nullTime(e.OccurredAt), sqlstore.EncodeHeaders(e.Headers), string(e.Payload), string(again)).Scan(&attempts, &status)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, errNoRowsSQL) {
		return 0, false, nil // processed meanwhile by another delivery
	}
	if err != nil {
		return 0, false, fmt.Errorf("postgres: inbox fail: %w", err)
	}
	return attempts, status == string(txbox.StatusDead), nil
}

func (d inboxDialect) InboxVersion(ctx context.Context, tx store.Tx, consumer, aggType, aggID string, version int64) (int64, bool, error) {
	q := d.inbox()
	var v int64
	err := tx.QueryRow(ctx, q.versionRaise, consumer, aggType, aggID, version).Scan(&v)
	if err == nil {
		return v, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, errNoRowsSQL) {
		return 0, false, fmt.Errorf("postgres: version guard: %w", err)
	}
	if err := tx.QueryRow(ctx, q.versionRead, consumer, aggType, aggID).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("postgres: version guard: %w", err)
	}
	return v, false, nil
}

// Admin side, on the store's pool: the statements of sqlinbox, and
// queries/inbox_cleanup.sql.

// InboxList implements store.InboxAdmin.
func (s *Store) InboxList(ctx context.Context, f store.InboxFilter) ([]store.InboxRow, error) {
	where, args := sqlstore.InboxFilterSQL(f, ph, 1)
	rows, err := s.pool.Query(ctx, sqlinbox.ListQuery(s.st.args.Inbox, where, f), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox list: %w", err)
	}
	defer rows.Close()
	return sqlinbox.ScanList[pgTime](rows)
}

// pgTime scans a TIMESTAMPTZ.
type pgTime struct{ sql.NullTime }

// Time implements sqlinbox.Timestamp.
func (p *pgTime) Time() (time.Time, bool) { return p.NullTime.Time, p.Valid }

// InboxReplay implements store.InboxAdmin: DEAD rows only, and never a
// parked undecodable message.
func (s *Store) InboxReplay(ctx context.Context, f store.InboxFilter) (int64, error) {
	f.Status = txbox.StatusDead
	where, args := sqlstore.InboxFilterSQL(f, ph, 2)
	q, args := sqlinbox.Replay(s.st.args.Inbox, where, ph, args)
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("postgres: inbox replay: %w", err)
	}
	return tag.RowsAffected(), nil
}

// InboxCleanupBatch implements store.InboxAdmin.
func (s *Store) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return s.inboxCleanupBatch(ctx, s.pool, age, limit)
}

func (s *Store) inboxCleanupBatch(ctx context.Context, on execer, age time.Duration, limit int) (int64, error) {
	tag, err := on.Exec(ctx, s.st.inboxCleanup, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: inbox cleanup: %w", err)
	}
	return tag.RowsAffected(), nil
}

// InboxCounts implements store.InboxAdmin.
func (s *Store) InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error) {
	rows, err := s.pool.Query(ctx, sqlinbox.CountsQuery(s.st.args.Inbox))
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox counts: %w", err)
	}
	defer rows.Close()
	return sqlinbox.ScanCounts(rows)
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

var (
	_ store.InboxProcessedAcquirer = inboxDialect{}
	_ store.InboxBatchInserter     = inboxDialect{}
)
