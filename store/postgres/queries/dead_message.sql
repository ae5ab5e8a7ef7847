{{/*
deadMessage: a tableless event that could not be delivered is stored as a
DEAD row, with the id it drew from the outbox's own sequence ($1); a copy
left by an earlier attempt (a restart before the position was confirmed)
is kept.
*/ -}}
INSERT INTO {{.Table}} (id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload, headers, status, retry_count, occurred_at, created_at, last_error)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'DEAD', 1, $9, $10, $11) ON CONFLICT DO NOTHING
