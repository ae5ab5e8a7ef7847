{{/*
heads: the fallback's candidates, cand(id, aggregate_type, aggregate_id), for
when the window is full of rows that cannot be taken (a deep blocked or held
aggregate at the front).

heads: the first unsent row of each aggregate, if it is deliverable, oldest
first, locked with SKIP LOCKED so that concurrent claimers split the work. An
aggregate whose first unsent row waits in RETRY or is held by another claim
has no head, so nothing of it is taken: that is how a failing event blocks
only its own aggregate, across processes. The heads are found one of two
ways, both through the aggregate index and neither through the floor (so an
explicit id below it is seen):
- h1, from firsts: a loose index scan, one index descent per aggregate that
  has unsent rows, stopped after .HeadBound aggregates. When it ends before
  that, it has every aggregate's first row: a backlog of a few deep
  aggregates (one hot tenant) costs a few descents, however many rows each
  holds.
- h2, with more aggregates than that: the unsent rows in id order, each kept
  when it is its aggregate's first (one probe each), until $1 are found; with
  many aggregates, heads are dense.
few decides once which of the two runs; the other is not executed.

cand: behind each head, the following unsent rows of its aggregate while
they stay deliverable (a prefix), at most $2. coalesce keeps a row with a
NULL next_retry_at or locked_until (written by hand) from counting as
deliverable.
*/}}
{{define "heads" -}}
firsts AS (
	SELECT * FROM (
		WITH RECURSIVE aggs(aggregate_type, aggregate_id, id) AS (
			(SELECT e.aggregate_type, e.aggregate_id, e.id FROM {{.Table}} e WHERE {{unsent "e"}}
			ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)
			UNION ALL
			SELECT n.aggregate_type, n.aggregate_id, n.id FROM aggs a CROSS JOIN LATERAL (
				SELECT e.aggregate_type, e.aggregate_id, e.id FROM {{.Table}} e
				WHERE {{unsent "e"}} AND (e.aggregate_type, e.aggregate_id) > (a.aggregate_type, a.aggregate_id)
				ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1) n
		)
		SELECT * FROM aggs LIMIT {{.HeadBound}}
	) f
), few AS (
	SELECT count(*) < {{.HeadBound}} AS yes FROM firsts
), heads AS (
	SELECT * FROM (
		SELECT o.id, o.aggregate_type, o.aggregate_id FROM {{.Table}} o
		WHERE (SELECT yes FROM few) AND o.id = ANY(ARRAY(SELECT id FROM firsts)) AND {{unsent "o"}} AND {{deliverable "o"}} AND {{inSplit "o"}}
		ORDER BY o.id
		LIMIT $1
		FOR UPDATE SKIP LOCKED) h1
	UNION ALL
	SELECT * FROM (
		SELECT o.id, o.aggregate_type, o.aggregate_id FROM {{.Table}} o
		WHERE NOT (SELECT yes FROM few) AND {{unsent "o"}} AND {{deliverable "o"}} AND {{inSplit "o"}} AND o.id = (SELECT e.id FROM {{.Table}} e
		WHERE e.aggregate_type = o.aggregate_type AND e.aggregate_id = o.aggregate_id AND {{unsent "e"}}
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)
		ORDER BY o.id
		LIMIT $1
		FOR UPDATE SKIP LOCKED) h2
), cand AS (
	SELECT r.id, heads.aggregate_type, heads.aggregate_id FROM heads CROSS JOIN LATERAL (
		SELECT x.id, bool_and(x.ok) OVER (ORDER BY x.id) AS prefix_ok FROM (
			SELECT e.id, coalesce({{deliverable "e"}}, false) AS ok
			FROM {{.Table}} e
			WHERE e.aggregate_type = heads.aggregate_type AND e.aggregate_id = heads.aggregate_id
			  AND e.id >= heads.id AND {{unsent "e"}}
			ORDER BY e.aggregate_type, e.aggregate_id, e.id
			LIMIT $2) x
	) r
	WHERE r.prefix_ok
)
{{- end}}
