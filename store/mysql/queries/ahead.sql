{{/*
ahead: for each row of the derived table k (.IDs: one "SELECT ? t, ? a, ? b"
per row, joined by UNION ALL: aggregate type, aggregate id, id), the first
DEAD row of its aggregate below it, or else the first unsent one (blocking
dead letters: store.DeadBlocker.Ahead). The hot table holds only unsent and DEAD rows, so
each probe reads the aggregate's range of aggregate_unsent_idx.
*/ -}}
SELECT k.t, k.a, e.id, e.event_id, e.status = 'DEAD'
FROM ({{.IDs}}) k
JOIN {{.Table}} e ON e.id = COALESCE(
	(SELECT MIN(x.id) FROM {{.Table}} x
	WHERE x.aggregate_type = k.t AND x.aggregate_id = k.a AND x.id < k.b AND x.status = 'DEAD'),
	(SELECT MIN(x.id) FROM {{.Table}} x
	WHERE x.aggregate_type = k.t AND x.aggregate_id = k.a AND x.id < k.b AND x.unsent = 1))
