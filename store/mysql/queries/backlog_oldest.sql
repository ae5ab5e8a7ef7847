{{/*
backlogOldest: how long ago, in µs on the database clock, the oldest unsent
row was written, answered from unsent_idx.
*/ -}}
SELECT TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6))
	FROM {{.Table}} WHERE unsent = 1
