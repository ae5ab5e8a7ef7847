{{/*
counts: InboxCounts, the rows of each consumer by status (ScanCounts).
*/ -}}
SELECT consumer_name, status, COUNT(*) FROM {{.Table}} GROUP BY consumer_name, status
