{{/*
list: the rows .Where selects (a filter's WHERE clause, without the
keyword), in .Order, at most .Limit.
*/ -}}
SELECT {{cols}} FROM {{.Table}} WHERE {{.Where}} ORDER BY {{.Order}} LIMIT {{.Limit}}
