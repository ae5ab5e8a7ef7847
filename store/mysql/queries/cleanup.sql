{{/*
cleanup: at most ?2 archived rows sent more than ?1 µs ago are deleted,
oldest first. The archive is not touched by claims, so cleanup never
contends with the relay.
*/ -}}
DELETE FROM {{.Sent}} WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
	ORDER BY sent_at, id LIMIT ?
