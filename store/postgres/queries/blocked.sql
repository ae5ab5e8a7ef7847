{{/*
blocked: the aggregates with held rows (held_idx), the unsent rows they
hold back (from the first held row of each on, through
aggregate_unsent_idx), and the age of the oldest held row in ms.
*/ -}}
WITH h AS (
	SELECT aggregate_type, aggregate_id, min(id) AS first_id, min(created_at) AS oldest
	FROM {{.Table}} WHERE status = 'RETRY' AND next_retry_at >= '2200-01-01 00:00:00+00'
	GROUP BY 1, 2
)
SELECT (SELECT count(*) FROM h),
	COALESCE((SELECT sum(c.n) FROM h CROSS JOIN LATERAL (
		SELECT count(*) AS n FROM {{.Table}} e
		WHERE e.aggregate_type = h.aggregate_type AND e.aggregate_id = h.aggregate_id AND e.id >= h.first_id
		  AND e.status IN ('PENDING', 'RETRY', 'PROCESSING')) c), 0)::bigint,
	COALESCE((SELECT EXTRACT(EPOCH FROM now() - min(oldest)) * 1000 FROM h), 0)::float8
