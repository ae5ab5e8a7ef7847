{{/*
versionRead: the version an aggregate's events were applied up to, read
when versionRaise found it stale.
*/ -}}
SELECT version FROM {{.Inbox}}_versions WHERE consumer_name = $1 AND aggregate_type = $2 AND aggregate_id = $3
