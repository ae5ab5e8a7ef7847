{{/*
countInboxCleanup: how many rows inbox_cleanup.sql would delete, of both
finished statuses, for the age ?1 (µs).
*/ -}}
SELECT COUNT(*) FROM {{.Inbox}}
	WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
