{{/*
blocked: the aggregates with held rows (store.HeldAfter, through
status_idx), the unsent rows they hold back (from the first held row of
each on, through aggregate_unsent_idx), and how long ago in µs the oldest
held row was written.
*/ -}}
SELECT COUNT(*), COALESCE(SUM(x.n), 0), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(x.oldest), UTC_TIMESTAMP(6)), 0)
FROM (SELECT h.oldest, (SELECT COUNT(*) FROM {{.Table}} e
		WHERE e.aggregate_type = h.aggregate_type AND e.aggregate_id = h.aggregate_id AND e.unsent = 1 AND e.id >= h.first_id) AS n
	FROM (SELECT aggregate_type, aggregate_id, MIN(id) AS first_id, MIN(created_at) AS oldest FROM {{.Table}}
		WHERE status = 'RETRY' AND next_retry_at >= '2200-01-01 00:00:00' GROUP BY aggregate_type, aggregate_id) h) x
