{{/*
statsOldest: when the oldest unsent row was written, and how long ago in
µs on the database clock.
*/ -}}
SELECT MIN(created_at), TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6))
	FROM {{.Table}} WHERE unsent = 1
