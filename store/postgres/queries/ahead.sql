{{/*
ahead: for each row named by $1 aggregate_type, $2 aggregate_id, $3 id, the
first DEAD row of its aggregate below it, or else the first unsent one
(blocking dead letters: store.DeadBlocker.Ahead). Each of the two probes reads the partial
index of its status (aggregate_unsent_idx, dead_aggregate_idx).
*/ -}}
SELECT k.aggregate_type, k.aggregate_id, f.id, f.event_id, f.dead
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(aggregate_type, aggregate_id, below)
CROSS JOIN LATERAL (
	SELECT * FROM (
		(SELECT e.id, e.event_id, false AS dead FROM {{.Table}} e
		WHERE e.aggregate_type = k.aggregate_type AND e.aggregate_id = k.aggregate_id AND e.id < k.below
		  AND e.status IN ('PENDING', 'RETRY', 'PROCESSING')
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)
		UNION ALL
		(SELECT e.id, e.event_id, true FROM {{.Table}} e
		WHERE e.aggregate_type = k.aggregate_type AND e.aggregate_id = k.aggregate_id AND e.id < k.below
		  AND e.status = 'DEAD'
		ORDER BY e.aggregate_type, e.aggregate_id, e.id LIMIT 1)
	) u ORDER BY u.dead DESC, u.id LIMIT 1
) f
