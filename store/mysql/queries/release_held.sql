{{/*
releaseHeld: the rows heldFree found (.IDs), if still held, go back to
PENDING (retry_count kept).
*/ -}}
UPDATE {{.Table}} SET status = 'PENDING', next_retry_at = NULL
	WHERE id IN ({{.IDs}}) AND status = 'RETRY' AND next_retry_at >= '2200-01-01 00:00:00'
