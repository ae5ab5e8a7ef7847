{{/*
ahead: for each row of the JSON array ?1 of [aggregate type, aggregate id,
id], the first DEAD row of its aggregate below it, or else the first unsent
one (blocking dead letters: store.DeadBlocker.Ahead), through the partial
indexes of the two (dead_aggregate_idx, aggregate_unsent_idx).
*/ -}}
SELECT k.t, k.a, e.id, e.event_id, e.status = 'DEAD'
FROM (SELECT value ->> 0 AS t, value ->> 1 AS a, value ->> 2 AS b FROM json_each(?1)) k
JOIN {{.Table}} e ON e.id = coalesce(
	(SELECT min(x.id) FROM {{.Table}} x
	WHERE x.aggregate_type = k.t AND x.aggregate_id = k.a AND x.id < k.b AND x.status = 'DEAD'),
	(SELECT min(x.id) FROM {{.Table}} x
	WHERE x.aggregate_type = k.t AND x.aggregate_id = k.a AND x.id < k.b AND {{unsent "x"}}))
