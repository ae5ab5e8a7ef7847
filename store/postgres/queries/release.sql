{{/*
release: the rows $1 that the lease $2 still holds go back unsent, without
spending an attempt: PENDING, or RETRY due now for a row that failed before.
*/ -}}
UPDATE {{.Table}} SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN now() ELSE NULL END,
		locked_by = NULL, locked_until = NULL
	WHERE id = ANY($1) AND locked_by = $2 AND status = 'PROCESSING'
