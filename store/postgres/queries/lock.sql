{{/*
lock: the second half of every claim, after the candidates (window.sql or
heads.sql). It locks the $1 lowest candidate ids with SKIP LOCKED, checking
each again on its latest version, and keeps of each aggregate only the
prefix it got (final): a candidate below the last locked id that was skipped
(held by another claim) or changed meanwhile ends its aggregate's run there
instead of leaving a gap (missed). The "--" comment in missed is part of the
statement the database sees.
*/}}
{{define "lock" -}}
, locked AS (
	SELECT {{cols "l"}}
	FROM {{.Table}} l
	WHERE l.id = ANY(ARRAY(SELECT id FROM cand)) AND {{unsent "l"}} AND coalesce({{deliverable "l"}}, false)
	ORDER BY l.id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), top AS (
	SELECT max(id) AS m FROM locked
), missed AS (
	SELECT c.aggregate_type, c.aggregate_id, min(c.id) AS first_id
	FROM cand c
	-- NOT IN a hashed subplan, not an anti-join: a generic plan estimates
	-- one locked row and would make the anti-join a nested loop.
	WHERE c.id < (SELECT m FROM top) AND c.id NOT IN (SELECT id FROM locked)
	GROUP BY 1, 2
), final AS (
	SELECT k.* FROM locked k
	LEFT JOIN missed m ON m.aggregate_type = k.aggregate_type AND m.aggregate_id = k.aggregate_id
	WHERE m.first_id IS NULL OR k.id < m.first_id
)
{{- end}}
