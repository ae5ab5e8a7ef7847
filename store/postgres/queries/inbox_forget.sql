{{/*
inboxForget: the consumer $1's rows of the events .IDs are deleted.
*/ -}}
DELETE FROM {{.Inbox}} WHERE consumer_name || '' = $1 AND event_id IN ({{.IDs}})
