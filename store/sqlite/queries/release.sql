{{/*
release: the rows (?1, a JSON array of ids) that the lease ?2 still holds go
back unsent, without spending an attempt: PENDING, or RETRY due at ?3 (now,
unix µs) for a row that failed before.
*/ -}}
UPDATE {{.Table}} SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN ?3 ELSE NULL END,
		locked_by = NULL, locked_until = NULL
	WHERE id IN (SELECT value FROM json_each(?1)) AND locked_by = ?2 AND status = 'PROCESSING'
