{{/*
markRetry: a failed row that the lease ?5 still holds goes to RETRY,
spending ?1 attempts, due ?2 µs from now, with the error ?3; ?4 is its id.
*/ -}}
UPDATE {{.Table}} SET status = 'RETRY', retry_count = retry_count + ?,
	next_retry_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, last_error = ?, locked_by = NULL, locked_until = NULL
	WHERE id = ? AND locked_by = ? AND status = 'PROCESSING'
