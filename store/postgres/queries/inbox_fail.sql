{{/*
inboxFail: one upsert records a failed delivery: the first failure inserts
the row, a later one spends another attempt; $4 is the attempt budget, $12
the status while attempts remain (RETRY or REPLAY). Every SET expression
reads the row as it was, so status is computed from the old retry_count +
1; the WHERE leaves a PROCESSED or SKIPPED row alone, and then RETURNING
yields no row.
*/ -}}
INSERT INTO {{.Inbox}} AS i (event_id, consumer_name, event_type, status, retry_count, error_message,
		aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload)
	VALUES ($1, $2, $3, CASE WHEN 1 >= $4 THEN 'DEAD' ELSE $12 END, 1, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (event_id, consumer_name) DO UPDATE SET
		retry_count = i.retry_count + 1,
		status = CASE WHEN i.retry_count + 1 >= $4 THEN 'DEAD' ELSE $12 END,
		error_message = EXCLUDED.error_message,
		aggregate_type = EXCLUDED.aggregate_type, aggregate_id = EXCLUDED.aggregate_id,
		aggregate_version = EXCLUDED.aggregate_version, occurred_at = EXCLUDED.occurred_at,
		headers = EXCLUDED.headers, payload = EXCLUDED.payload
	WHERE i.status NOT IN ('PROCESSED', 'SKIPPED')
	RETURNING retry_count, status
