{{/*
stats: the rows of each status in the hot table, and the archive's as
SENT. Counting the archive reads it; Cleanup is what keeps it small.
*/ -}}
SELECT status, COUNT(*) FROM {{.Table}} GROUP BY status
	UNION ALL SELECT 'SENT', COUNT(*) FROM {{.Sent}}
