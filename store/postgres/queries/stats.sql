{{/*
stats: the rows of each status in the outbox table, and the archive's as
SENT.
*/ -}}
SELECT status, count(*) FROM {{.Table}} GROUP BY status
	UNION ALL SELECT 'SENT', count(*) FROM {{.Sent}}
