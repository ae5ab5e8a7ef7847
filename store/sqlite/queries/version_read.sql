{{/*
versionRead: the version an aggregate's events were applied up to, read
when versionRaise found it stale.
*/ -}}
SELECT version FROM {{.Inbox}}_versions WHERE consumer_name = ? AND aggregate_type = ? AND aggregate_id = ?
