{{/*
markDead: a failed row that the lease ?4 still holds goes to DEAD, spending
?1 attempts, with the error ?2; ?3 is its id.
*/ -}}
UPDATE {{.Table}} SET status = 'DEAD', retry_count = retry_count + ?,
	next_retry_at = NULL, last_error = ?, locked_by = NULL, locked_until = NULL
	WHERE id = ? AND locked_by = ? AND status = 'PROCESSING'
