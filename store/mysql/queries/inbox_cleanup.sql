{{/*
inboxCleanup: at most ?3 inbox rows of the finished status ?1 received more
than ?2 µs ago are deleted, oldest first along cleanup_idx.
*/ -}}
DELETE FROM {{.Inbox}} WHERE status = ? AND received_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
	ORDER BY received_at LIMIT ?
