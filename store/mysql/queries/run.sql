{{/*
run: one head's run, the next unsent rows of its aggregate after the head,
with whether each is deliverable, read on the aggregate index with its own
LIMIT. MariaDB has no LATERAL, so a claim joins one of these per head with
UNION ALL (queries.runQuery). Arguments: aggregate type, aggregate id, head
id, how many rows.
*/ -}}
(SELECT e.id, e.aggregate_type, e.aggregate_id, COALESCE({{deliverable "e"}}, 0) AS ok
		FROM {{.Table}} e FORCE INDEX (aggregate_unsent_idx)
		WHERE e.aggregate_type = ? AND e.aggregate_id = ? AND e.unsent = 1 AND e.id > ?
		ORDER BY e.id LIMIT ?)
