{{/*
heldMessage: a tableless event held behind a DEAD event of its aggregate
(blocking dead letters) is stored as a held row (RETRY due in $12 ms, no
attempt spent), with the id it drew from the outbox's own sequence ($1):
the release makes it PENDING, and a CDC reader then delivers it. A copy
left by an earlier attempt is kept.
*/ -}}
INSERT INTO {{.Table}} (id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload, headers, status, retry_count, next_retry_at, occurred_at, created_at, last_error)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'RETRY', 0, now() + $12 * interval '1 millisecond', $9, $10, $11) ON CONFLICT DO NOTHING
