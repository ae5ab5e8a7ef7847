{{/*
statsOldest: when the oldest unsent row was written, and how long ago in
ms on the database clock.
*/ -}}
SELECT min(created_at), EXTRACT(EPOCH FROM now() - min(created_at)) * 1000
	FROM {{.Table}} WHERE status IN ('PENDING', 'RETRY', 'PROCESSING')
