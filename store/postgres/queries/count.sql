{{/*
count: how many rows .Where selects in the tables List reads.
*/ -}}
SELECT (SELECT count(*) FROM {{.Table}} WHERE {{.Where}})
{{- if .Archive}} + (SELECT count(*) FROM {{.Sent}} WHERE {{.Where}}){{end}}
