{{/*
markSentArchive: the locked rows (.IDs) are copied into the archive, SENT
now.
*/ -}}
INSERT INTO {{.Sent}} ({{cols}})
	SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		payload, headers, 'SENT', retry_count, NULL, NULL, NULL,
		occurred_at, created_at, UTC_TIMESTAMP(6), last_error
	FROM {{.Table}} WHERE id IN ({{.IDs}})
