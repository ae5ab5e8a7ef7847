{{/*
countCleanup: how many rows cleanup.sql would delete for the age ?1 (µs).
*/ -}}
SELECT COUNT(*) FROM {{.Sent}}
	WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
