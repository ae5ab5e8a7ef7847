{{/*
window: the fast path's candidates, cand(id, aggregate_type, aggregate_id),
from one window of the $2 lowest unsent ids. Every earlier unsent row of an
aggregate in the window is in the window too, so a row is a candidate when it
is deliverable and lies below its aggregate's first row that is not (bad).
Hash joins on those few rows; no sort of the window.

Rows that count as not deliverable besides:
- busy rows (running, win0): a row whose xmax is a transaction still running
  at this statement's snapshot is locked by another claim, most often another
  relay's batch in flight; skipping it here is cheaper than trying its lock. A
  wrong guess only leaves the row to the next claim, and a locked row not
  recognised is skipped by SKIP LOCKED. xmax is 32 bits, hence the modulo
  2^32; "newer" is bounded (1,000 ids past the horizon) so that an xmax that
  is a MultiXact id, not an xid, looks busy only for a moment. txid_
  functions: PostgreSQL 12 has no pg_snapshot_ ones.
- held rows (win): .Held, the rows this store's other open claims hold.
  Locked, their aggregates' later rows would stay locked until this claim
  ends: PostgreSQL cannot unlock one row. With .Chain (the chained claim) a
  held row still deliverable does not end its aggregate's run, so the claim
  takes the rows behind this store's batches in flight; its caller keeps
  their order (store.ChainClaimer).
A store split with other relays (split.go) keeps its share after the LIMIT,
so the scan stays bounded when its share is empty. .Alone leaves out the
busy check: the store is the only relay on the table as last counted
(split.go), so no other claim is likely to hold rows; if another relay
joined since, the row locks still keep order (lock.sql), and the next count
brings the check back. (The split itself is counted at every claim, so a
newcomer gets its share at once.)

.Floor, when set, is the parameter holding an id below which no row is
unsent (floor.go): the scan starts there, not at the index entries of
delivered rows that VACUUM has not removed yet. But a producer may write
explicit ids below it, and taking an aggregate's rows above the floor first
would break its order. So the aggregates of the $1 lowest candidates (no
other could be locked) are probed through the aggregate index for an unsent
row below the floor (top0, low); one that has such a row gives, instead of
its window rows, its run from there: its deliverable prefix, held rows not
deliverable, at most .MaxRun rows. A chained claim does not probe the
aggregates of its held rows (the claim that took them did, and the probe
reads every index entry of the aggregate's delivered rows not yet vacuumed);
an id written below the floor into one of them later is found by
floor_below.sql.
*/}}
{{define "window" -}}
{{if not .Alone}}running AS (
	SELECT ARRAY(SELECT (x % 4294967296)::text::xid FROM txid_snapshot_xip(s) x) AS xids,
		age((txid_snapshot_xmax(s) % 4294967296)::text::xid) AS newer
	FROM txid_current_snapshot() s
), {{end}}win0 AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id, w.dok,
		{{if .Alone}}w.dok{{else}}w.dok AND (w.xmax = '0'::xid
			OR NOT (age(w.xmax) BETWEEN -1000 AND (SELECT newer FROM running)
				OR w.xmax = ANY((SELECT xids FROM running)::xid[]))){{end}} AS ok
	FROM (SELECT w.id, w.aggregate_type, w.aggregate_id{{if not .Alone}}, w.xmax{{end}}, coalesce({{deliverable "w"}}, false) AS dok
		FROM {{.Table}} w
		WHERE {{unsent "w"}}{{if .Floor}} AND w.id >= {{.Floor}}{{end}}
		ORDER BY w.id
		LIMIT $2) w
), win AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id, h.id IS NULL AND w.ok AS take, h.id IS NOT NULL AS held,
		CASE WHEN h.id IS NULL THEN w.ok ELSE {{if .Chain}}w.dok{{else}}false{{end}} END AS ok
	FROM win0 w LEFT JOIN unnest({{.Held}}::bigint[]) AS h(id) ON h.id = w.id
	WHERE {{inSplit "w"}}
), bad AS (
	SELECT aggregate_type, aggregate_id, min(id) AS first_id FROM win WHERE NOT ok GROUP BY 1, 2
), cand0 AS (
	SELECT w.id, w.aggregate_type, w.aggregate_id
	FROM win w LEFT JOIN bad b ON b.aggregate_type = w.aggregate_type AND b.aggregate_id = w.aggregate_id
	WHERE w.take AND (b.first_id IS NULL OR w.id < b.first_id)
)
{{- if not .Floor}}, cand AS (SELECT * FROM cand0)
{{- else}}, top0 AS (
	SELECT * FROM cand0 ORDER BY id LIMIT $1
), low AS (
	SELECT a.aggregate_type, a.aggregate_id, f.id AS first_id
	FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM top0) a
	CROSS JOIN LATERAL (
		SELECT e.id FROM {{.Table}} e
		WHERE e.aggregate_type = a.aggregate_type AND e.aggregate_id = a.aggregate_id
		  AND e.id < {{.Floor}} AND {{unsent "e"}}
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1) f
	{{- if .Chain}}
	WHERE NOT EXISTS (SELECT 1 FROM win h WHERE h.held AND h.aggregate_type = a.aggregate_type AND h.aggregate_id = a.aggregate_id)
	{{- end}}
), cand AS (
	SELECT c.* FROM top0 c
	WHERE NOT EXISTS (SELECT 1 FROM low l WHERE l.aggregate_type = c.aggregate_type AND l.aggregate_id = c.aggregate_id)
	UNION ALL
	SELECT r.id, low.aggregate_type, low.aggregate_id FROM low CROSS JOIN LATERAL (
		SELECT x.id, bool_and(x.ok) OVER (ORDER BY x.id) AS prefix_ok FROM (
			SELECT e.id, coalesce({{deliverable "e"}}, false) AND NOT e.id = ANY({{.Held}}::bigint[]) AS ok
			FROM {{.Table}} e
			WHERE e.aggregate_type = low.aggregate_type AND e.aggregate_id = low.aggregate_id
			  AND e.id >= low.first_id AND {{unsent "e"}}
			ORDER BY e.aggregate_type, e.aggregate_id, e.id
			LIMIT {{.MaxRun}}) x
	) r
	WHERE r.prefix_ok
)
{{- end}}
{{- end}}
