{{/*
inboxLookup: the row of an event seen before, locked.
*/ -}}
SELECT status, retry_count FROM {{.Inbox}} WHERE {{.InboxKey}} FOR UPDATE
