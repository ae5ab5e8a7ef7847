{{/*
cleanupTable: what cleanup_archive.sql does for the SENT rows in the outbox
table, marked in place before 003_sent_archive.sql.
*/ -}}
DELETE FROM {{.Table}} WHERE id IN (
	SELECT id FROM {{.Table}} WHERE status = 'SENT' AND sent_at < now() - $1 * interval '1 millisecond'
	LIMIT $2 FOR UPDATE SKIP LOCKED)
