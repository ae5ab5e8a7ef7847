{{/*
blocked: the aggregates with held rows (held_idx), the unsent rows they
hold back (from the first held row of each on, through
aggregate_unsent_idx), and the oldest held row's created_at (unix µs).
*/ -}}
SELECT count(*), coalesce(sum(x.n), 0), min(x.oldest)
FROM (SELECT h.oldest, (SELECT count(*) FROM {{.Table}} e
		WHERE e.aggregate_type = h.aggregate_type AND e.aggregate_id = h.aggregate_id AND e.id >= h.first_id AND {{unsent "e"}}) AS n
	FROM (SELECT aggregate_type, aggregate_id, min(id) AS first_id, min(created_at) AS oldest FROM {{.Table}}
		WHERE status = 'RETRY' AND next_retry_at >= 7258118400000000 GROUP BY aggregate_type, aggregate_id) h) x
