{{/*
countInboxCleanup: how many rows inbox_cleanup.sql would delete for the
cut-off ?1.
*/ -}}
SELECT count(*) FROM {{.Inbox}}
	WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < ?
