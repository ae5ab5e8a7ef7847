{{/*
countCleanup: how many rows cleanup_archive.sql and cleanup_table.sql
would delete for the age $1 (ms).
*/ -}}
SELECT
	(SELECT count(*) FROM {{.Sent}} WHERE sent_at < now() - $1 * interval '1 millisecond')
	+ (SELECT count(*) FROM {{.Table}} WHERE status = 'SENT' AND sent_at < now() - $1 * interval '1 millisecond')
