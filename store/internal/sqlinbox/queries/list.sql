{{/*
list: InboxList, the rows .Where selects (a filter's WHERE clause, without
the keyword), oldest first, at most .Limit. The columns are Cols, in
ScanList's order.
*/ -}}
SELECT {{.Cols}} FROM {{.Table}} WHERE {{.Where}} ORDER BY received_at, event_id, consumer_name LIMIT {{.Limit}}
