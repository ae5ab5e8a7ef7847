{{/*
between: the unsent rows between the first and the last head (exclusive),
with whether each is deliverable; read when the heads fill the claim, so
that only rows below the last head can take a place (Store.runs). The heads
scan has just read this range. COALESCE: NULL (a PROCESSING row without
locked_until, say, written by hand) reads as not deliverable.
*/ -}}
SELECT e.id, e.aggregate_type, e.aggregate_id, COALESCE({{deliverable "e"}}, 0) AS ok
	FROM {{.Table}} e FORCE INDEX (unsent_idx)
	WHERE e.unsent = 1 AND e.id > ? AND e.id < ?
	ORDER BY e.id
