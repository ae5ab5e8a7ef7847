{{/*
stats: the rows of each status; SENT rows stay in the table.
*/ -}}
SELECT status, count(*) FROM {{.Table}} GROUP BY status
