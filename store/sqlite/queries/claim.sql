{{/*
claim: the claim, one statement inside BEGIN IMMEDIATE. Parameters: ?1
limit, ?2 run cap, ?3 lease owner, ?4 now (unix µs), ?5 lease length (µs).

heads:  the first unsent row of each aggregate, if deliverable (head.sql),
        oldest first, at most ?1.
bounds: per head, the id of the ?2-th unsent row of its aggregate (SQLite
        has no LATERAL; this bounds the run's index range so that a deep
        backlog of one aggregate is not read).
runs:   the unsent rows of each aggregate from its head to its bound, with
        whether each is deliverable; prefix keeps a row only if it and every
        earlier row of its run are deliverable, so order cannot break.
picked: the ?1 lowest ids of all runs; a prefix of each run again.

No SKIP LOCKED: the write lock taken by BEGIN IMMEDIATE already makes this
claim the only writer until COMMIT.
*/ -}}
WITH heads AS MATERIALIZED (
	SELECT o.id, o.aggregate_type, o.aggregate_id
	{{template "head" .}}
	ORDER BY o.id
	LIMIT ?1
), bounds AS MATERIALIZED (
	SELECT h.id, h.aggregate_type, h.aggregate_id, COALESCE((
		SELECT x.id FROM {{.Table}} x
		WHERE x.aggregate_type = h.aggregate_type AND x.aggregate_id = h.aggregate_id
		  AND x.id >= h.id AND {{unsent "x"}}
		ORDER BY x.id LIMIT 1 OFFSET ?2 - 1), 9223372036854775807) AS last
	FROM heads h
), runs AS (
	SELECT e.id, b.id AS head, COALESCE({{deliverable "e" .Now}}, 0) AS ok
	FROM bounds b JOIN {{.Table}} e
	  ON e.aggregate_type = b.aggregate_type AND e.aggregate_id = b.aggregate_id
	 AND e.id >= b.id AND e.id <= b.last AND {{unsent "e"}}
), prefix AS (
	SELECT id, min(ok) OVER (PARTITION BY head ORDER BY id) AS ok FROM runs
), picked AS (
	SELECT id FROM prefix WHERE ok ORDER BY id LIMIT ?1
)
UPDATE {{.Table}} SET status = 'PROCESSING', locked_by = ?3, locked_until = ?4 + ?5
WHERE id IN (SELECT id FROM picked)
RETURNING {{cols}}
