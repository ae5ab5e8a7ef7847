{{/*
inboxLookup: the row of an event seen before (?1 event, ?2 consumer).
*/ -}}
SELECT status, retry_count FROM {{.Inbox}} WHERE event_id = ? AND consumer_name = ?
