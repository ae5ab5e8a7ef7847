{{/*
list: the rows .Where selects (a filter's WHERE clause, without the
keyword), in .Order, at most .Limit: from the hot table (.Hot, with the
index hint .Hint) and from the archive of SENT rows (.Archive), each part
ordered and limited on its own, then both together.
*/ -}}
{{if .Hot}}(SELECT {{cols}} FROM {{.Table}}{{.Hint}} WHERE {{.Where}} ORDER BY {{.Order}} LIMIT {{.Limit}}){{end}}
{{- if and .Hot .Archive}} UNION ALL {{end}}
{{- if .Archive}}(SELECT {{cols}} FROM {{.Sent}} WHERE {{.Where}} ORDER BY {{.Order}} LIMIT {{.Limit}}){{end}}
{{- if and .Hot .Archive}} ORDER BY {{.Order}} LIMIT {{.Limit}}{{end}}
