{{/*
releaseHeld: the rows heldFree found (.IDs), if still held, are due now.
*/ -}}
UPDATE {{.Table}} SET next_retry_at = UTC_TIMESTAMP(6)
	WHERE id IN ({{.IDs}}) AND status = 'RETRY' AND next_retry_at >= '2200-01-01 00:00:00'
