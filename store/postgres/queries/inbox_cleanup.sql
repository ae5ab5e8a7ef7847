{{/*
inboxCleanup: at most $2 PROCESSED or SKIPPED inbox rows received more than
$1 ms ago are deleted, skipping rows a consumer holds.
*/ -}}
DELETE FROM {{.Inbox}} WHERE (event_id, consumer_name) IN (
	SELECT event_id, consumer_name FROM {{.Inbox}} WHERE status IN ('PROCESSED', 'SKIPPED')
	AND received_at < now() - $1 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)
