package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/txbox/txbox/store"
)

// queries holds this dialect's relay SQL, built once per table name.
type queries struct {
	table      string
	probe      string
	claim      string
	markSent   string
	markFailed string
	release    string
	deleteSent bool
}

// unsentTerm is written exactly as in the partial indexes' WHERE clause:
// SQLite uses a partial index only when the query repeats its terms.
const unsentTerm = `status IN ('PENDING', 'RETRY', 'PROCESSING')`

// deliverable is true for a row a claimer may take at time %[2]s (unix µs).
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= %[2]s)
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= %[2]s))`

func buildQueries(table string, deleteSent bool) queries {
	d := func(alias, now string) string { return fmt.Sprintf(deliverable, alias, now) }
	u := func(alias string) string { return alias + "." + unsentTerm }
	q := queries{table: table, deleteSent: deleteSent}

	// head(now) selects the first unsent row of each aggregate, if it is
	// deliverable, oldest first. An aggregate whose first unsent row waits in
	// RETRY or is leased to another relay has no head, so nothing of it is
	// taken: that is how a failing event blocks only its own aggregate.
	head := func(now string) string {
		return `FROM ` + table + ` o
	WHERE ` + u("o") + ` AND ` + d("o", now) + `
	  AND NOT EXISTS (
		SELECT 1 FROM ` + table + ` e
		WHERE e.aggregate_type = o.aggregate_type AND e.aggregate_id = o.aggregate_id
		  AND e.id < o.id AND ` + u("e") + `)`
	}

	// The probe runs outside the write transaction (a WAL read never waits):
	// nothing claimable, no write lock taken.
	q.probe = `SELECT 1 ` + head("?1") + ` LIMIT 1`

	// The claim, one statement inside BEGIN IMMEDIATE. Parameters: ?1 limit,
	// ?2 run cap, ?3 lease, ?4 now (unix µs), ?5 lease length (µs).
	//
	// heads:  as above, at most ?1.
	// bounds: per head, the id of the ?2-th unsent row of its aggregate
	//         (SQLite has no LATERAL; this bounds the run's index range so a
	//         deep backlog of one aggregate is not read).
	// runs:   the unsent rows of each aggregate from its head to its bound,
	//         with whether each is deliverable; prefix keeps a row only if it
	//         and every earlier row of its run are deliverable, so order
	//         cannot break.
	// picked: the ?1 lowest ids of all runs; a prefix of each run again.
	//
	// No SKIP LOCKED: the write lock taken by BEGIN IMMEDIATE already makes
	// this claim the only writer until COMMIT.
	q.claim = `WITH heads AS MATERIALIZED (
	SELECT o.id, o.aggregate_type, o.aggregate_id
	` + head("?4") + `
	ORDER BY o.id
	LIMIT ?1
), bounds AS MATERIALIZED (
	SELECT h.id, h.aggregate_type, h.aggregate_id, COALESCE((
		SELECT x.id FROM ` + table + ` x
		WHERE x.aggregate_type = h.aggregate_type AND x.aggregate_id = h.aggregate_id
		  AND x.id >= h.id AND ` + u("x") + `
		ORDER BY x.id LIMIT 1 OFFSET ?2 - 1), 9223372036854775807) AS last
	FROM heads h
), runs AS (
	SELECT e.id, b.id AS head, COALESCE(` + d("e", "?4") + `, 0) AS ok
	FROM bounds b JOIN ` + table + ` e
	  ON e.aggregate_type = b.aggregate_type AND e.aggregate_id = b.aggregate_id
	 AND e.id >= b.id AND e.id <= b.last AND ` + u("e") + `
), prefix AS (
	SELECT id, min(ok) OVER (PARTITION BY head ORDER BY id) AS ok FROM runs
), picked AS (
	SELECT id FROM prefix WHERE ok ORDER BY id LIMIT ?1
)
UPDATE ` + table + ` SET status = 'PROCESSING', locked_by = ?3, locked_until = ?4 + ?5
WHERE id IN (SELECT id FROM picked)
RETURNING ` + cols

	// Marks: ?1 JSON array, ?2 lease, ?3 now (unix µs). Fenced by lease.
	fence := ` AND locked_by = ?2 AND status = 'PROCESSING'`
	if deleteSent {
		q.markSent = `DELETE FROM ` + table + ` WHERE id IN (SELECT value FROM json_each(?1))` + fence
	} else {
		q.markSent = `UPDATE ` + table + ` SET status = 'SENT', sent_at = ?3, locked_by = NULL, locked_until = NULL,
			next_retry_at = NULL WHERE id IN (SELECT value FROM json_each(?1))` + fence
	}
	q.markFailed = `UPDATE ` + table + ` AS t SET
		status = CASE WHEN f.dead THEN 'DEAD' ELSE 'RETRY' END,
		retry_count = t.retry_count + f.spend,
		next_retry_at = CASE WHEN f.dead THEN NULL ELSE ?3 + f.delay END,
		last_error = f.err, locked_by = NULL, locked_until = NULL
	FROM (SELECT value ->> 'id' AS id, value ->> 'dead' AS dead, value ->> 'delay' AS delay, value ->> 'err' AS err, value ->> 'spend' AS spend
		FROM json_each(?1)) AS f
	WHERE t.id = f.id AND t.locked_by = ?2 AND t.status = 'PROCESSING'`
	q.release = `UPDATE ` + table + ` SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN ?3 ELSE NULL END,
		locked_by = NULL, locked_until = NULL
	WHERE id IN (SELECT value FROM json_each(?1))` + fence
	return q
}

// maxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const maxRun = 64

// Claim implements store.Outbox.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("sqlite: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	var one int
	switch err := s.db.QueryRowContext(ctx, s.q.probe, micros(s.now())).Scan(&one); err {
	case nil:
	case sql.ErrNoRows:
		return nil, nil
	default:
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	run := min(req.Limit, maxRun)
	var recs []store.Record
	err := s.immediate(ctx, func(c *sql.Conn) error {
		// Now is read after the write lock is ours: waiting for it may take
		// a while, and leases must run from the moment of the claim.
		rows, err := c.QueryContext(ctx, s.q.claim, req.Limit, run, req.Lease, micros(s.now()), req.LeaseFor.Microseconds())
		if err != nil {
			return err
		}
		recs, err = collect(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
	return recs, nil
}
