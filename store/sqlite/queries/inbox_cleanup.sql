{{/*
inboxCleanup: at most ?2 PROCESSED or SKIPPED inbox rows received before ?1
(unix µs) are deleted, oldest first, on the partial index of finished rows.
*/ -}}
DELETE FROM {{.Inbox}} WHERE rowid IN (
	SELECT rowid FROM {{.Inbox}} WHERE status IN ('PROCESSED', 'SKIPPED') AND received_at < ?
	ORDER BY received_at LIMIT ?)
