package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/txbox/txbox/store"
)

// queries holds this dialect's relay SQL, built once per table name.
type queries struct {
	table      string
	claim      string // fallback: head-based
	claimScan  string // fast path: window scan
	windowFull string
	markSent   string
	markFailed string
	release    string
}

// deliverable is true for a row a claimer may take now.
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= now())
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= now()))`

const unsent = `%[1]s.status IN ('PENDING', 'RETRY', 'PROCESSING')`

func buildQueries(table string, deleteSent bool) queries {
	d := func(alias string) string { return fmt.Sprintf(deliverable, alias) }
	u := func(alias string) string { return fmt.Sprintf(unsent, alias) }
	q := queries{table: table}

	// The claim, in one statement (so in one transaction):
	//
	// heads: the first unsent row of each aggregate, if it is deliverable,
	//   oldest first, locked with SKIP LOCKED so concurrent claimers split the
	//   work. An aggregate whose first unsent row waits in RETRY or is leased
	//   to another relay has no head, so nothing of it is taken: that is how a
	//   failing event blocks only its own aggregate, across relay processes.
	// runs: behind each head, the following unsent rows of its aggregate while
	//   they stay deliverable (a prefix, so order cannot break), at most $2.
	// picked: the $1 lowest ids of all runs; a prefix of each run again.
	// locked/final: the picked rows are locked, then checked again on their
	//   latest version, and each aggregate keeps only the prefix that is
	//   still deliverable. A row changed meanwhile (the holder of an expired
	//   lease marking it) ends its run there instead of leaving a gap.
	//
	// No other claimer can want the run rows: it would need their head,
	// which we hold. coalesce keeps a row with a NULL next_retry_at or
	// locked_until (hand-written) from counting as deliverable.
	q.claim = `WITH heads AS (
	SELECT o.id, o.aggregate_type, o.aggregate_id
	FROM ` + table + ` o
	WHERE ` + u("o") + ` AND ` + d("o") + `
	  AND NOT EXISTS (
		SELECT 1 FROM ` + table + ` e
		WHERE e.aggregate_type = o.aggregate_type AND e.aggregate_id = o.aggregate_id
		  AND e.id < o.id AND ` + u("e") + `)
	ORDER BY o.id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), runs AS (
	SELECT r.id FROM heads h CROSS JOIN LATERAL (
		SELECT x.id, bool_and(x.ok) OVER (ORDER BY x.id) AS prefix_ok FROM (
			SELECT e.id, coalesce(` + d("e") + `, false) AS ok
			FROM ` + table + ` e
			WHERE e.aggregate_type = h.aggregate_type AND e.aggregate_id = h.aggregate_id
			  AND e.id >= h.id AND ` + u("e") + `
			ORDER BY e.id
			LIMIT $2) x
	) r
	WHERE r.prefix_ok
), picked AS (
	SELECT id FROM runs ORDER BY id LIMIT $1
), locked AS (
	SELECT l.id, l.aggregate_type, l.aggregate_id, coalesce(` + d("l") + `, false) AS ok
	FROM ` + table + ` l
	WHERE l.id IN (SELECT id FROM picked)
	ORDER BY l.id
	FOR UPDATE
), final AS (
	SELECT id FROM (
		SELECT id, bool_and(ok) OVER (PARTITION BY aggregate_type, aggregate_id ORDER BY id) AS prefix_ok FROM locked
	) f WHERE f.prefix_ok
)
UPDATE ` + table + ` t
SET status = 'PROCESSING', locked_by = $3, locked_until = now() + $4 * interval '1 millisecond'
WHERE t.id = ANY(ARRAY(SELECT id FROM final))
RETURNING ` + prefixed("t", cols)

	// The fast path reads the $5 lowest unsent rows once, in id order. Every
	// earlier unsent row of an aggregate in that window is in the window
	// too, so "deliverable, and every earlier unsent row of my aggregate is
	// deliverable" is a running bool_and per aggregate. Candidates are
	// locked with SKIP LOCKED and checked again on their latest version; a
	// candidate that was skipped or changed ends its aggregate's prefix.
	q.claimScan = `WITH win AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id, coalesce(` + d("w") + `, false) AS ok
	FROM ` + table + ` w
	WHERE ` + u("w") + `
	ORDER BY w.id
	LIMIT $5
), pre AS (
	SELECT id, aggregate_type, aggregate_id,
	       bool_and(ok) OVER (PARTITION BY aggregate_type COLLATE "C", aggregate_id COLLATE "C" ORDER BY id) AS prefix_ok
	FROM win
), cand AS (
	SELECT id, aggregate_type, aggregate_id FROM pre WHERE prefix_ok ORDER BY id LIMIT $1
), locked AS (
	SELECT l.id, coalesce(` + d("l") + `, false) AS ok
	FROM ` + table + ` l
	WHERE l.id IN (SELECT id FROM cand)
	FOR UPDATE SKIP LOCKED
), final AS (
	SELECT id FROM (
		SELECT c.id, bool_and(coalesce(k.ok, false)) OVER (PARTITION BY c.aggregate_type COLLATE "C", c.aggregate_id COLLATE "C" ORDER BY c.id) AS prefix_ok
		FROM cand c LEFT JOIN locked k ON k.id = c.id
	) f WHERE f.prefix_ok
)
UPDATE ` + table + ` t
SET status = 'PROCESSING', locked_by = $3, locked_until = now() + $4 * interval '1 millisecond'
WHERE t.id = ANY(ARRAY(SELECT id FROM final)) AND $2::int >= 0
RETURNING ` + prefixed("t", cols)
	q.windowFull = `SELECT count(*) = $1 FROM (SELECT 1 FROM ` + table + ` w WHERE ` + u("w") + ` ORDER BY w.id LIMIT $1) x`

	if deleteSent {
		q.markSent = `DELETE FROM ` + table + ` WHERE id = ANY($1) AND locked_by = $2 AND status = 'PROCESSING'`
	} else {
		q.markSent = `UPDATE ` + table + ` SET status = 'SENT', sent_at = now(), locked_by = NULL, locked_until = NULL,
			next_retry_at = NULL WHERE id = ANY($1) AND locked_by = $2 AND status = 'PROCESSING'`
	}
	q.markFailed = `UPDATE ` + table + ` t SET
		status = CASE WHEN f.dead THEN 'DEAD' ELSE 'RETRY' END,
		retry_count = t.retry_count + 1,
		next_retry_at = CASE WHEN f.dead THEN NULL ELSE now() + f.delay_ms * interval '1 millisecond' END,
		last_error = f.err, locked_by = NULL, locked_until = NULL
	FROM unnest($1::bigint[], $2::bool[], $3::bigint[], $4::text[]) AS f(id, dead, delay_ms, err)
	WHERE t.id = f.id AND t.locked_by = $5 AND t.status = 'PROCESSING'`
	q.release = `UPDATE ` + table + ` SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN now() ELSE NULL END,
		locked_by = NULL, locked_until = NULL
	WHERE id = ANY($1) AND locked_by = $2 AND status = 'PROCESSING'`
	return q
}

// MaxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const MaxRun = 64

// Claim implements store.Outbox.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("postgres: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	run := min(req.Limit, MaxRun)
	window := min(req.Limit*ScanFactor, MaxWindow)
	recs, err := s.claimWith(ctx, s.q.claimScan, req.Limit, run, req.Lease, req.LeaseFor.Milliseconds(), window)
	if err != nil || len(recs) == req.Limit {
		return recs, err
	}
	// The window was full of rows that could not be taken (a deep blocked
	// or leased aggregate at the front): deliverable rows may lie beyond
	// it. The head-based claim finds them wherever they are.
	var full bool
	if err := s.pool.QueryRow(ctx, s.q.windowFull, window).Scan(&full); err != nil {
		return recs, fmt.Errorf("postgres: claim: %w", err)
	}
	if !full {
		return recs, nil
	}
	more, err := s.claimWith(ctx, s.q.claim, req.Limit-len(recs), run, req.Lease, req.LeaseFor.Milliseconds())
	recs = append(recs, more...)
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
	return recs, err
}

// ScanFactor and MaxWindow size the fast path's window: Limit*ScanFactor
// rows, at most MaxWindow, so rows in flight at the front do not hide the
// deliverable ones behind them.
const (
	ScanFactor = 4
	MaxWindow  = 20000
)

func (s *Store) claimWith(ctx context.Context, query string, args ...any) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
	return recs, nil
}

func prefixed(alias, list string) string {
	out := make([]byte, 0, len(list)*2)
	start := true
	for i := 0; i < len(list); i++ {
		c := list[i]
		if start && c != ' ' && c != '\n' && c != '\t' {
			out = append(out, alias...)
			out = append(out, '.')
			start = false
		}
		if c == ',' {
			start = true
		}
		out = append(out, c)
	}
	return string(out)
}
