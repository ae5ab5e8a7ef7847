{{/*
list: the rows .Where selects (a filter's WHERE clause, without the
keyword), in .Order, at most .Limit: from the outbox table, which may hold
SENT rows too (rows marked in place before 003_sent_archive.sql), and,
with .Archive, from the archive of SENT rows; each part ordered and
limited on its own, then both together.
*/ -}}
(SELECT {{.Cols}} FROM {{.Table}} WHERE {{.Where}} ORDER BY {{.Order}} LIMIT {{.Limit}})
{{- if .Archive}} UNION ALL (SELECT {{.Cols}} FROM {{.Sent}} WHERE {{.Where}} ORDER BY {{.Order}} LIMIT {{.Limit}}) ORDER BY {{.Order}} LIMIT {{.Limit}}{{end}}
