{{/*
countInboxCleanup: how many rows inbox_cleanup.sql would delete for the age
$1 (ms).
*/ -}}
SELECT count(*) FROM {{.Inbox}}
	WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < now() - $1 * interval '1 millisecond'
