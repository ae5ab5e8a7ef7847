{{/*
inboxLookup: the row of an event (?1) for a consumer (?2), after an upsert.
FOR UPDATE: a locking read sees the latest committed row (the upsert holds
its lock already), not the snapshot of a REPEATABLE READ transaction.
*/ -}}
SELECT status, retry_count FROM {{.Inbox}} WHERE event_id = ? AND consumer_name = ? FOR UPDATE
