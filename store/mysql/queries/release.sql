{{/*
release: the rows (.IDs) that the lease (the last argument) still holds go
back unsent, without spending an attempt: PENDING, or RETRY due now for a
row that failed before.
*/ -}}
UPDATE {{.Table}} SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
	next_retry_at = CASE WHEN retry_count > 0 THEN UTC_TIMESTAMP(6) ELSE NULL END,
	locked_by = NULL, locked_until = NULL
	WHERE id IN ({{.IDs}}) AND locked_by = ? AND status = 'PROCESSING'
