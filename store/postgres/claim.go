package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// queries holds this dialect's relay SQL, built once per table name.
type queries struct {
	table      string
	sent       string // archive of delivered rows
	claim      string // lease, fallback: head-based
	claimScan  string // lease, fast path: window scan
	txClaim    string // transaction-held, fast path
	txChain    string // transaction-held, fast path, behind this store's held rows
	txHeads    string // transaction-held, fallback
	windowFull string
	floorProbe string // format: %s is the id sequence
	floorBelow string // the rescan: the lowest unsent id below $1
	markSent   string // lease-fenced
	markFailed string // lease-fenced
	release    string
	txSent     string // rows this transaction holds
	txFailed   string
}

// deliverable is true for a row a claimer may take now.
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= now())
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= now()))`

const unsent = `%[1]s.status IN ('PENDING', 'RETRY', 'PROCESSING')`

// allCols is every column of the outbox and of its archive, in one order.
const allCols = `id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers,
	status, retry_count, next_retry_at, locked_by, locked_until, occurred_at, created_at, sent_at, last_error`

func buildQueries(table, sent string, deleteSent bool) queries {
	d := func(alias string) string { return fmt.Sprintf(deliverable, alias) }
	u := func(alias string) string { return fmt.Sprintf(unsent, alias) }
	q := queries{table: table, sent: sent}

	// first is the first unsent row of alias's aggregate, looked up through
	// the aggregate index.
	first := func(alias string) string {
		return `(SELECT e.id FROM ` + table + ` e
		WHERE e.aggregate_type = ` + alias + `.aggregate_type AND e.aggregate_id = ` + alias + `.aggregate_id AND ` + u("e") + `
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)`
	}

	// runFrom is an aggregate's run behind its first row start: the
	// following unsent rows while they stay deliverable (and pass notHeld),
	// a prefix of at most limit rows, read through the aggregate index.
	// Both the below-floor candidates and the fallback's runs are one.
	runFrom := func(alias, start, notHeld, limit string) string {
		return `SELECT r.id, ` + alias + `.aggregate_type, ` + alias + `.aggregate_id FROM ` + alias + ` CROSS JOIN LATERAL (
		SELECT x.id, bool_and(x.ok) OVER (ORDER BY x.id) AS prefix_ok FROM (
			SELECT e.id, coalesce(` + d("e") + `, false)` + notHeld + ` AS ok
			FROM ` + table + ` e
			WHERE e.aggregate_type = ` + alias + `.aggregate_type AND e.aggregate_id = ` + alias + `.aggregate_id
			  AND e.id >= ` + alias + `.` + start + ` AND ` + u("e") + `
			ORDER BY e.aggregate_type, e.aggregate_id, e.id
			LIMIT ` + limit + `) x
	) r
	WHERE r.prefix_ok`
	}

	// belowFloor ends the window's candidates, cand0, as cand. With a
	// floor, an aggregate may have an unsent row below it that the window
	// cannot see: ids are meant to come from the sequence, so that none
	// appears there (floor.go), but a producer may write explicit ids, and
	// taking the aggregate's rows above the floor first would deliver it out
	// of order. So each candidate aggregate is probed for an unsent row below
	// the floor through the aggregate index (one descent per aggregate in the
	// window, bounded by the floor so that it stops at the first entry above
	// it without reading that row; ordered as the index is so that a generic
	// plan uses it too), and an
	// aggregate whose first row lies below the floor (low) gives, instead of
	// its window rows, its run from that first row: its deliverable prefix,
	// held rows counting as not deliverable, at most maxRun rows.
	//
	// Only the $1 lowest candidates (top0) are probed and kept: the claim
	// locks at most $1 rows, and the rows found below the floor come before
	// all of them, so no candidate beyond those could be taken anyway.
	// Probing every candidate of the window (three times as many) was 13 of
	// a 35 ms claim over 100,000 aggregates (BENCHMARKS.md, issue 21).
	//
	// A chained claim (chain) does not probe the aggregates whose earlier
	// rows this store holds: the claim that took those probed it, and the
	// probe reads every index entry of the aggregate's delivered rows that
	// VACUUM has not removed yet, which for a hot aggregate is most of its
	// history (25 ms a claim at 500k rows into a Zipf backlog with
	// autovacuum off). An id written by hand below the floor into such an
	// aggregate after its earlier rows were claimed is found by the look
	// below the floor (floor.go) instead.
	belowFloor := func(held, floor string, chain bool) string {
		if floor == "" {
			return `, cand AS (SELECT * FROM cand0)`
		}
		notHeldAgg := ""
		if chain {
			notHeldAgg = `
	WHERE NOT EXISTS (SELECT 1 FROM win h WHERE h.held AND h.aggregate_type = a.aggregate_type AND h.aggregate_id = a.aggregate_id)`
		}
		return `, top0 AS (
	SELECT * FROM cand0 ORDER BY id LIMIT $1
), low AS (
	SELECT a.aggregate_type, a.aggregate_id, f.id AS first_id
	FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM top0) a
	CROSS JOIN LATERAL (
		SELECT e.id FROM ` + table + ` e
		WHERE e.aggregate_type = a.aggregate_type AND e.aggregate_id = a.aggregate_id
		  AND e.id < ` + floor + ` AND ` + u("e") + `
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1) f` + notHeldAgg + `
), cand AS (
	SELECT c.* FROM top0 c
	WHERE NOT EXISTS (SELECT 1 FROM low l WHERE l.aggregate_type = c.aggregate_type AND l.aggregate_id = c.aggregate_id)
	UNION ALL
	` + runFrom("low", "first_id", ` AND NOT e.id = ANY(`+held+`::bigint[])`, fmt.Sprint(maxRun)) + `
)`
	}

	// A claim is one statement in two halves. The first finds candidates,
	// cand(id, aggregate_type, aggregate_id): deliverable rows, each one
	// preceded in its aggregate only by deliverable candidates. The second,
	// lockTail, locks the $1 lowest candidate ids with SKIP LOCKED, checking
	// each again on its latest version, and keeps of each aggregate only the
	// prefix it got: a candidate below the last locked id that was skipped
	// (held by another claim) or changed meanwhile ends its aggregate's run
	// there instead of leaving a gap.
	//
	// The fast path's candidates come from one window of the $2 lowest
	// unsent ids: every earlier unsent row of an aggregate in the window is
	// in the window too, so a row is a candidate when it is deliverable and
	// lies below its aggregate's first undeliverable row. Hash joins on the
	// few undeliverable rows; no sort of the window. A store split with
	// others (split.go) keeps its share of the window, after the LIMIT: the
	// scan stays bounded when its share holds no rows at all.
	//
	// held lists the rows this process's other open claims hold: they count
	// as undeliverable here, so their aggregates' later rows are not even
	// tried. Tried, they would be locked and then left out, and stay locked
	// (PostgreSQL cannot unlock one row) until this claim ends.
	//
	// floor is an id below which no row is unsent (floor.go): the window's
	// index scan starts there instead of walking the entries of delivered
	// rows that VACUUM has not removed yet.
	//
	// busy: a row whose xmax is a transaction still running at this
	// statement's snapshot (listed in it, or newer than its horizon) is
	// locked or being changed by another claim, most often another relay
	// process's batch in flight. It counts as undeliverable, like a held row:
	// trying its lock only to skip it cost ~1.8 us a row, up to 2,000 rows a
	// claim with two relays of two workers each. A wrong guess costs only
	// this claim's share: a row whose locker ended since is taken by the next
	// claim; a locked row not recognised is skipped by SKIP LOCKED as before.
	// A row never locked has xmax 0 and is done with at the first test.
	// xmax is 32 bits; age() compares it with the snapshot's ids modulo 2^32.
	// "Newer" is bounded (1,000 ids past the first age() reference) so that
	// an xmax that is not an xid (a MultiXact id from shared locks, which
	// txbox never takes) can only ever look busy for a moment. txid_
	// functions: PostgreSQL 12 has no pg_snapshot_ ones.
	//
	// chain (txChain): a held row still deliverable does not end its
	// aggregate's run; it is only not taken again. The claim then takes the
	// rows behind this store's batches in flight, so one hot aggregate can
	// be in several claims at once. Its caller keeps their order
	// (store.ChainClaimer): a held row that its claim hands back or fails
	// makes the later claim's rows of that aggregate go back too.
	scanCand := func(held, floor string, chain bool) string {
		heldOK := "false"
		if chain {
			heldOK = "w.dok"
		}
		return `running AS (
	SELECT ARRAY(SELECT (x % 4294967296)::text::xid FROM txid_snapshot_xip(s) x) AS xids,
		age((txid_snapshot_xmax(s) % 4294967296)::text::xid) AS newer
	FROM txid_current_snapshot() s
), win0 AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id, w.dok,
		w.dok AND (w.xmax = '0'::xid
			OR NOT (age(w.xmax) BETWEEN -1000 AND (SELECT newer FROM running)
				OR w.xmax = ANY((SELECT xids FROM running)::xid[]))) AS ok
	FROM (SELECT w.id, w.aggregate_type, w.aggregate_id, w.xmax, coalesce(` + d("w") + `, false) AS dok
		FROM ` + table + ` w
		WHERE ` + u("w") + above("w", floor) + `
		ORDER BY w.id
		LIMIT $2) w
), win AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id, h.id IS NULL AND w.ok AS take, h.id IS NOT NULL AS held,
		CASE WHEN h.id IS NULL THEN w.ok ELSE ` + heldOK + ` END AS ok
	FROM win0 w LEFT JOIN unnest(` + held + `::bigint[]) AS h(id) ON h.id = w.id
	WHERE ` + inSplit("w") + `
), bad AS (
	SELECT aggregate_type, aggregate_id, min(id) AS first_id FROM win WHERE NOT ok GROUP BY 1, 2
), cand0 AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id
	FROM win w LEFT JOIN bad b ON b.aggregate_type = w.aggregate_type AND b.aggregate_id = w.aggregate_id
	WHERE w.take AND (b.first_id IS NULL OR w.id < b.first_id)
)` + belowFloor(held, floor, chain)
	}

	// The fallback's candidates, for when the window is full of rows that
	// cannot be taken (a deep blocked or held aggregate at the front):
	// heads: the first unsent row of each aggregate, if it is deliverable,
	//   oldest first, locked with SKIP LOCKED so concurrent claimers split
	//   the work. An aggregate whose first unsent row waits in RETRY or is
	//   held by another claim has no head, so nothing of it is taken: that is
	//   how a failing event blocks only its own aggregate, across processes.
	//   The heads are found one of two ways, both through the aggregate
	//   index and neither through the floor (so an explicit id below it is
	//   seen):
	//   - firsts: a loose index scan, one index descent per aggregate that
	//     has unsent rows, stopped after headBound aggregates. When it ends
	//     before that, it has every aggregate's first row: a backlog of few,
	//     deep aggregates (one hot tenant) costs a few descents, however
	//     many rows each holds. Looking at each row instead, as this query
	//     did before, cost 23.6 s over 19,500 rows of one aggregate.
	//   - with more aggregates than that, the unsent rows in id order, each
	//     kept when it is its aggregate's first (one probe each), until $1
	//     are found: with many aggregates, heads are dense.
	//   Which one runs is decided once (few); the other is not executed.
	// runs: behind each head, the following unsent rows of its aggregate
	//   while they stay deliverable (a prefix), at most $2.
	// coalesce keeps a row with a NULL next_retry_at or locked_until
	// (hand-written) from counting as deliverable.
	headCand := `firsts AS (
	SELECT * FROM (
		WITH RECURSIVE aggs(aggregate_type, aggregate_id, id) AS (
			(SELECT e.aggregate_type, e.aggregate_id, e.id FROM ` + table + ` e WHERE ` + u("e") + `
			ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)
			UNION ALL
			SELECT n.aggregate_type, n.aggregate_id, n.id FROM aggs a CROSS JOIN LATERAL (
				SELECT e.aggregate_type, e.aggregate_id, e.id FROM ` + table + ` e
				WHERE ` + u("e") + ` AND (e.aggregate_type, e.aggregate_id) > (a.aggregate_type, a.aggregate_id)
				ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1) n
		)
		SELECT * FROM aggs LIMIT ` + fmt.Sprint(headBound) + `
	) f
), few AS (
	SELECT count(*) < ` + fmt.Sprint(headBound) + ` AS yes FROM firsts
), heads AS (
	SELECT * FROM (
		SELECT o.id, o.aggregate_type, o.aggregate_id FROM ` + table + ` o
		WHERE (SELECT yes FROM few) AND o.id = ANY(ARRAY(SELECT id FROM firsts)) AND ` + u("o") + ` AND ` + d("o") + ` AND ` + inSplit("o") + `
		ORDER BY o.id
		LIMIT $1
		FOR UPDATE SKIP LOCKED) h1
	UNION ALL
	SELECT * FROM (
		SELECT o.id, o.aggregate_type, o.aggregate_id FROM ` + table + ` o
		WHERE NOT (SELECT yes FROM few) AND ` + u("o") + ` AND ` + d("o") + ` AND ` + inSplit("o") + ` AND o.id = ` + first("o") + `
		ORDER BY o.id
		LIMIT $1
		FOR UPDATE SKIP LOCKED) h2
), cand AS (
	` + runFrom("heads", "id", "", "$2") + `
)`

	lockTail := `, locked AS (
	SELECT ` + prefixed("l", cols) + `
	FROM ` + table + ` l
	WHERE l.id = ANY(ARRAY(SELECT id FROM cand)) AND ` + u("l") + ` AND coalesce(` + d("l") + `, false)
	ORDER BY l.id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), top AS (
	SELECT max(id) AS m FROM locked
), missed AS (
	SELECT c.aggregate_type, c.aggregate_id, min(c.id) AS first_id
	FROM cand c
	-- NOT IN a hashed subplan, not an anti-join: a generic plan estimates
	-- one locked row and made the anti-join a nested loop (55 ms, not 9).
	WHERE c.id < (SELECT m FROM top) AND c.id NOT IN (SELECT id FROM locked)
	GROUP BY 1, 2
), final AS (
	SELECT k.* FROM locked k
	LEFT JOIN missed m ON m.aggregate_type = k.aggregate_type AND m.aggregate_id = k.aggregate_id
	WHERE m.first_id IS NULL OR k.id < m.first_id
)`

	// A lease claim writes the lease into the rows, so the claim commits at
	// once and the lease outlives the statement.
	lease := `
UPDATE ` + table + ` t
SET status = 'PROCESSING', locked_by = $3, locked_until = now() + $4 * interval '1 millisecond'
WHERE t.id = ANY(ARRAY(SELECT id FROM final))
RETURNING ` + prefixed("t", cols)
	// Every claim looks only at this store's share of the aggregates
	// (split.go); the split argument is the last parameter.
	q.claimScan = `WITH ` + splitSQL("$5") + `, ` + scanCand(`'{}'`, ``, false) + lockTail + lease
	q.claim = `WITH ` + splitSQL("$5") + `, ` + headCand + lockTail + lease

	// A transaction-held claim returns the locked rows as they are; the
	// open transaction is the lease.
	q.txClaim = `WITH ` + splitSQL("$5") + `, ` + scanCand(`$3`, `$4`, false) + lockTail + `
SELECT * FROM final ORDER BY id`
	q.txChain = `WITH ` + splitSQL("$5") + `, ` + scanCand(`$3`, `$4`, true) + lockTail + `
SELECT * FROM final ORDER BY id`
	q.txHeads = `WITH ` + splitSQL("$3") + `, ` + headCand + lockTail + `
SELECT * FROM final ORDER BY id`
	q.windowFull = `SELECT count(*) = $1 FROM (SELECT 1 FROM ` + table + ` w WHERE ` + u("w") + ` AND w.id >= $2 ORDER BY w.id LIMIT $1) x`
	// The floor's probe (floor.go): the lowest unsent id this statement's
	// snapshot sees at or above $1 (or, with none, the next id the sequence
	// will hand out), and whether the candidate whose marker, virtual
	// transaction ids and time are $2, $3, $4 has nothing left running;
	// and the sequence's next id, which falls below the floor when the
	// sequence was set back (TRUNCATE ... RESTART IDENTITY); and the
	// table's file node, which every TRUNCATE changes (floorTracker.rewritten).
	// txid_ functions: PostgreSQL 12 has no pg_snapshot_ ones.
	q.floorProbe = `SELECT coalesce((SELECT w.id FROM ` + table + ` w WHERE ` + u("w") + ` AND w.id >= $1 ORDER BY w.id LIMIT 1),
		(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %[1]s)),
	CASE WHEN $2::bigint IS NULL THEN false
		ELSE txid_snapshot_xmin(txid_current_snapshot()) >= $2::bigint
			AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'virtualxid' AND l.virtualxid = ANY($3::text[]))
			AND NOT EXISTS (SELECT 1 FROM pg_prepared_xacts x WHERE x.prepared >= $4::timestamptz) END,
	(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %[1]s),
	coalesce(pg_relation_filenode($5::text::regclass)::bigint, 0)`

	q.floorBelow = `SELECT (SELECT w.id FROM ` + table + ` w WHERE ` + u("w") + ` AND w.id < $1 ORDER BY w.id LIMIT 1)`

	// Marking sent moves the rows into the archive in one statement (or
	// deletes them). The lease-fenced form only touches rows this lease
	// still holds.
	fence := ` AND locked_by = $2 AND status = 'PROCESSING'`
	move := func(where string) string {
		if deleteSent {
			return `DELETE FROM ` + table + ` WHERE ` + where
		}
		return `WITH d AS (DELETE FROM ` + table + ` WHERE ` + where + ` RETURNING *)
INSERT INTO ` + sent + ` (` + allCols + `)
SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers,
	'SENT', retry_count, NULL, NULL, NULL, occurred_at, created_at, now(), last_error FROM d`
	}
	q.markSent = move(`id = ANY($1)` + fence)
	q.txSent = move(`id = ANY($1)`)

	failed := `UPDATE ` + table + ` t SET
		status = CASE WHEN f.dead THEN 'DEAD' ELSE 'RETRY' END,
		retry_count = t.retry_count + f.spend,
		next_retry_at = CASE WHEN f.dead THEN NULL ELSE now() + f.delay_ms * interval '1 millisecond' END,
		last_error = f.err, locked_by = NULL, locked_until = NULL
	FROM unnest($1::bigint[], $2::bool[], $3::bigint[], $4::text[], $5::int[]) AS f(id, dead, delay_ms, err, spend)
	WHERE t.id = f.id`
	q.markFailed = failed + ` AND t.locked_by = $6 AND t.status = 'PROCESSING'`
	q.txFailed = failed
	q.release = `UPDATE ` + table + ` SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN now() ELSE NULL END,
		locked_by = NULL, locked_until = NULL
	WHERE id = ANY($1) AND locked_by = $2 AND status = 'PROCESSING'`
	return q
}

// maxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const maxRun = 64

// headBound is how many aggregates the fallback's loose index scan visits
// before it looks at rows instead (buildQueries, heads).
const headBound = 4096

// Claim implements store.Outbox.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("postgres: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	run := min(req.Limit, maxRun)
	window := min(req.Limit*scanFactor, maxWindow)
	split := s.splitArg()
	recs, err := s.claimWith(ctx, s.q.claimScan, req.Limit, window, req.Lease, req.LeaseFor.Milliseconds(), split)
	if err != nil || len(recs) == req.Limit {
		return recs, err
	}
	// The window was full of rows that could not be taken (a deep blocked
	// or leased aggregate at the front): deliverable rows may lie beyond
	// it. The head-based claim finds them wherever they are.
	var full bool
	if err := s.pool.QueryRow(ctx, s.q.windowFull, window, noFloor).Scan(&full); err != nil {
		return recs, fmt.Errorf("postgres: claim: %w", err)
	}
	if !full {
		return recs, nil
	}
	more, err := s.claimWith(ctx, s.q.claim, req.Limit-len(recs), run, req.Lease, req.LeaseFor.Milliseconds(), split)
	recs = append(recs, more...)
	sortByID(recs)
	return recs, err
}

// above bounds a claim's read of the unsent index from below; the lease
// path has no floor.
func above(alias, floor string) string {
	if floor == "" {
		return ""
	}
	return " AND " + alias + ".id >= " + floor
}

func sortByID(recs []store.Record) {
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
}

// rollbackTimeout bounds ending a claim that is being given up.
const rollbackTimeout = 5 * time.Second

// scanFactor and maxWindow size the fast path's window: Limit*scanFactor
// rows, at most maxWindow, so rows in flight at the front do not hide the
// deliverable ones behind them.
const (
	scanFactor = 4
	maxWindow  = 20000
)

// claimWith runs a lease claim as an unnamed statement, planned for its
// arguments every time: the lease claim is the fallback path, and a plan
// fitted to the arguments is the safe choice there.
func (s *Store) claimWith(ctx context.Context, query string, args ...any) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	sortByID(recs)
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
