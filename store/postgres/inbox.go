package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

// The inbox transaction's SQL. Everything runs on the consumer's tx.

func (d Dialect) inbox() string {
	t := d.Tables.WithDefaults()
	return t.Qualified(t.Inbox)
}

// inboxKey selects one inbox row by its primary key. consumer_name is
// compared through an expression so that no plan can answer it from the
// monitor index (consumer_name, status, received_at): on a table without
// statistics (a fresh inbox, autovacuum off) the planner rates that index
// as cheap as the key for a prepared statement's generic plan, and once
// cached, that plan reads every row of the consumer for each event.
const inboxKey = `event_id = $1 AND consumer_name || '' = $2`

// InboxAcquire implements store.InboxDialect with ON CONFLICT DO NOTHING:
// one row inserted means first delivery. A concurrent delivery of the same
// event waits on the unique index until the first transaction ends, then
// finds the row.
func (d Dialect) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	return d.acquire(ctx, tx, consumer, e, false)
}

// InboxAcquireProcessed is InboxAcquire for a handler that is expected to
// succeed: the row is written PROCESSED (processed_at now(), the stored
// event cleared) by the statement that claims it, so a successful handler
// needs no InboxDone and a first delivery costs one statement. The caller
// rolls the transaction, or its savepoint, back when the handler fails, and
// calls InboxDone for any other outcome (SKIPPED for a stale version).
func (d Dialect) InboxAcquireProcessed(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	return d.acquire(ctx, tx, consumer, e, true)
}

func (d Dialect) acquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, processed bool) (store.InboxState, int, error) {
	status, doneAt := `'PROCESSING'`, `NULL`
	if processed {
		status, doneAt = `'PROCESSED'`, `now()`
	}
	n, err := tx.Exec(ctx, `INSERT INTO `+d.inbox()+` (event_id, consumer_name, event_type, status, processed_at, aggregate_type, aggregate_id, aggregate_version, occurred_at)
		VALUES ($1, $2, $3, `+status+`, `+doneAt+`, $4, $5, $6, $7) ON CONFLICT (event_id, consumer_name) DO NOTHING`,
		e.ID, consumer, e.Type, e.AggregateType, e.AggregateID, e.AggregateVersion, nullTime(e.OccurredAt))
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: inbox insert: %w", err)
	}
	if n == 1 {
		return store.InboxFresh, 0, nil
	}
	return d.existing(ctx, tx, consumer, e.ID, processed)
}

// existing locks the row of an event seen before and reports its state; a
// row to run again (RETRY, REPLAY) is set to PROCESSING, or PROCESSED when
// processed is set.
func (d Dialect) existing(ctx context.Context, tx store.Tx, consumer, eventID string, processed bool) (store.InboxState, int, error) {
	var status string
	var attempts int
	if err := tx.QueryRow(ctx, `SELECT status, retry_count FROM `+d.inbox()+` WHERE `+inboxKey+` FOR UPDATE`,
		eventID, consumer).Scan(&status, &attempts); err != nil {
		return 0, 0, fmt.Errorf("postgres: inbox lookup: %w", err)
	}
	switch txbox.Status(status) {
	case txbox.StatusProcessed, txbox.StatusSkipped:
		return store.InboxDuplicate, attempts, nil
	case txbox.StatusDead:
		return store.InboxParked, attempts, nil
	}
	set := `status = 'PROCESSING'`
	if processed {
		set = `status = 'PROCESSED', processed_at = now(), payload = NULL, headers = NULL`
	}
	if _, err := tx.Exec(ctx, `UPDATE `+d.inbox()+` SET `+set+` WHERE `+inboxKey, eventID, consumer); err != nil {
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
func (d Dialect) InboxInsertProcessed(ctx context.Context, tx store.Tx, consumer string, evs []txbox.Event) ([]bool, error) {
	fresh := make([]bool, len(evs))
	// The rows go in event id order, so that two transactions inserting
	// overlapping batches (a redelivery to a second process) lock the keys
	// in one order and do not deadlock.
	order := make([]int, len(evs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return evs[order[a]].ID < evs[order[b]].ID })
	for start := 0; start < len(order); start += inboxChunk {
		part := order[start:min(len(order), start+inboxChunk)]
		var q strings.Builder
		q.WriteString(`WITH ins AS (INSERT INTO ` + d.inbox() + ` (event_id, consumer_name, event_type, status, processed_at, aggregate_type, aggregate_id, aggregate_version, occurred_at) VALUES `)
		args := make([]any, 0, 1+6*len(part))
		args = append(args, consumer)
		for i, k := range part {
			e := &evs[k]
			if i > 0 {
				q.WriteString(", ")
			}
			b := len(args)
			fmt.Fprintf(&q, "($%d, $1, $%d, 'PROCESSED', now(), $%d, $%d, $%d, $%d)", b+1, b+2, b+3, b+4, b+5, b+6)
			args = append(args, e.ID, e.Type, e.AggregateType, e.AggregateID, e.AggregateVersion, nullTime(e.OccurredAt))
		}
		// The ids come back as one JSON array: store.Tx reads one row, and
		// this works for pgx and database/sql alike.
		q.WriteString(` ON CONFLICT (event_id, consumer_name) DO NOTHING RETURNING event_id) SELECT COALESCE(json_agg(event_id), '[]')::text FROM ins`)
		var js string
		if err := tx.QueryRow(ctx, q.String(), args...).Scan(&js); err != nil {
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

// inboxChunk keeps one InboxInsertProcessed statement well under
// PostgreSQL's 65535 parameters.
const inboxChunk = 1000

// InboxForget deletes rows InboxInsertProcessed inserted in this
// transaction for events that were not applied after all.
func (d Dialect) InboxForget(ctx context.Context, tx store.Tx, consumer string, eventIDs []string) error {
	for start := 0; start < len(eventIDs); start += inboxChunk {
		part := eventIDs[start:min(len(eventIDs), start+inboxChunk)]
		var q strings.Builder
		q.WriteString(`DELETE FROM ` + d.inbox() + ` WHERE consumer_name || '' = $1 AND event_id IN (`)
		args := make([]any, 0, 1+len(part))
		args = append(args, consumer)
		for i, id := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "$%d", i+2)
			args = append(args, id)
		}
		q.WriteString(")")
		if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("postgres: inbox forget: %w", err)
		}
	}
	return nil
}

func (d Dialect) InboxDone(ctx context.Context, tx store.Tx, consumer, eventID string, status txbox.Status, note string) error {
	var n *string
	if note != "" {
		n = &note
	}
	_, err := tx.Exec(ctx, `UPDATE `+d.inbox()+` SET status = $3, processed_at = now(), error_message = COALESCE($4, error_message),
		payload = NULL, headers = NULL WHERE `+inboxKey, eventID, consumer, string(status), n)
	if err != nil {
		return fmt.Errorf("postgres: inbox done: %w", err)
	}
	return nil
}

func (d Dialect) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, errMsg string, maxAttempts int, again txbox.Status) (int, bool, error) {
	var attempts int
	var status string
	err := tx.QueryRow(ctx, `INSERT INTO `+d.inbox()+` AS i (event_id, consumer_name, event_type, status, retry_count, error_message,
			aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload)
		VALUES ($1, $2, $3, CASE WHEN 1 >= $4 THEN 'DEAD' ELSE $12 END, 1, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (event_id, consumer_name) DO UPDATE SET
			retry_count = i.retry_count + 1,
			status = CASE WHEN i.retry_count + 1 >= $4 THEN 'DEAD' ELSE $12 END,
			error_message = EXCLUDED.error_message,
			aggregate_type = EXCLUDED.aggregate_type, aggregate_id = EXCLUDED.aggregate_id,
			aggregate_version = EXCLUDED.aggregate_version, occurred_at = EXCLUDED.occurred_at,
			headers = EXCLUDED.headers, payload = EXCLUDED.payload
		WHERE i.status NOT IN ('PROCESSED', 'SKIPPED')
		RETURNING retry_count, status`,
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

func (d Dialect) InboxVersion(ctx context.Context, tx store.Tx, consumer, aggType, aggID string, version int64) (int64, bool, error) {
	t := d.inbox() + "_versions"
	var v int64
	err := tx.QueryRow(ctx, `INSERT INTO `+t+` AS v (consumer_name, aggregate_type, aggregate_id, version) VALUES ($1, $2, $3, $4)
		ON CONFLICT (consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
		WHERE v.version < EXCLUDED.version
		RETURNING version`, consumer, aggType, aggID, version).Scan(&v)
	if err == nil {
		return v, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, errNoRowsSQL) {
		return 0, false, fmt.Errorf("postgres: version guard: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT version FROM `+t+` WHERE consumer_name = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
		consumer, aggType, aggID).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("postgres: version guard: %w", err)
	}
	return v, false, nil
}

// Admin side, on the store's pool.

const inboxCols = `event_id, consumer_name, event_type, status, received_at, processed_at, retry_count, error_message,
	aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload`

func (s *Store) InboxList(ctx context.Context, f store.InboxFilter) ([]store.InboxRow, error) {
	where, args := sqlstore.InboxFilterSQL(f, ph, 1)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+inboxCols+` FROM `+Dialect{Tables: s.tables}.inbox()+` WHERE `+where+
		` ORDER BY received_at, event_id LIMIT `+strconv.Itoa(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox list: %w", err)
	}
	defer rows.Close()
	var out []store.InboxRow
	for rows.Next() {
		var r store.InboxRow
		var status string
		var errMsg, aggType, aggID, headers, payload *string
		var occurred *time.Time
		if err := rows.Scan(&r.EventID, &r.ConsumerName, &r.EventType, &status, &r.ReceivedAt, &r.ProcessedAt, &r.RetryCount, &errMsg,
			&aggType, &aggID, &r.Event.AggregateVersion, &occurred, &headers, &payload); err != nil {
			return nil, err
		}
		r.Status = txbox.Status(status)
		r.ErrorMessage = deref(errMsg)
		r.Event.ID, r.Event.Type = r.EventID, r.EventType
		r.Event.AggregateType, r.Event.AggregateID = deref(aggType), deref(aggID)
		if occurred != nil {
			r.Event.OccurredAt = *occurred
		}
		r.Event.Headers = sqlstore.DecodeHeaders(headers)
		if payload != nil {
			r.Event.Payload = []byte(*payload)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) InboxReplay(ctx context.Context, f store.InboxFilter) (int64, error) {
	f.Status = txbox.StatusDead
	where, args := sqlstore.InboxFilterSQL(f, ph, 2)
	tag, err := s.pool.Exec(ctx, `UPDATE `+Dialect{Tables: s.tables}.inbox()+` SET status = 'REPLAY', retry_count = 0
		WHERE event_type <> $1 AND `+where, append([]any{store.UndecodableType}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("postgres: inbox replay: %w", err)
	}
	return tag.RowsAffected(), nil
}

// InboxCleanupBatch implements store.InboxAdmin.
func (s *Store) InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error) {
	t := Dialect{Tables: s.tables}.inbox()
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+t+` WHERE (event_id, consumer_name) IN (
		SELECT event_id, consumer_name FROM `+t+` WHERE status IN ('PROCESSED', 'SKIPPED')
		AND received_at < now() - $1 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)`, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: inbox cleanup: %w", err)
	}
	return tag.RowsAffected(), nil
}

// InboxCounts implements store.InboxAdmin.
func (s *Store) InboxCounts(ctx context.Context) (map[string]map[txbox.Status]int64, error) {
	rows, err := s.pool.Query(ctx, sqlinbox.CountsQuery(Dialect{Tables: s.tables}.inbox()))
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox counts: %w", err)
	}
	defer rows.Close()
	return sqlinbox.ScanCounts(rows)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

var (
	_ store.InboxProcessedAcquirer = Dialect{}
	_ store.InboxBatchInserter     = Dialect{}
)
