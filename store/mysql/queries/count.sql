{{/*
count: how many rows .Where selects in the tables List reads (.Hot,
.Archive).
*/ -}}
SELECT {{if .Hot}}(SELECT COUNT(*) FROM {{.Table}} WHERE {{.Where}}){{end}}
{{- if and .Hot .Archive}} + {{end}}
{{- if .Archive}}(SELECT COUNT(*) FROM {{.Sent}} WHERE {{.Where}}){{end}}
