{{/*
inboxFail: one upsert records a failed delivery: the first failure inserts
the row, a later one spends another attempt; ?4 is the attempt budget, ?5
the status while attempts remain (RETRY or REPLAY). In SQLite's DO UPDATE
every SET expression reads the row as it was (as in any UPDATE), so status
is computed from the old retry_count + 1; the WHERE leaves a PROCESSED or
SKIPPED row alone, and then RETURNING yields no row.
*/ -}}
INSERT INTO {{.Inbox}} AS i (event_id, consumer_name, event_type, status, received_at, retry_count,
		error_message, aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload)
	VALUES (?1, ?2, ?3, CASE WHEN 1 >= ?4 THEN 'DEAD' ELSE ?5 END, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
	ON CONFLICT (event_id, consumer_name) DO UPDATE SET
		retry_count = i.retry_count + 1,
		status = CASE WHEN i.retry_count + 1 >= ?4 THEN 'DEAD' ELSE ?5 END,
		error_message = excluded.error_message,
		aggregate_type = excluded.aggregate_type, aggregate_id = excluded.aggregate_id,
		aggregate_version = excluded.aggregate_version, occurred_at = excluded.occurred_at,
		headers = excluded.headers, payload = excluded.payload
	WHERE i.status NOT IN ('PROCESSED', 'SKIPPED')
	RETURNING retry_count, status
