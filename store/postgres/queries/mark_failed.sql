{{/*
markFailed, txFailed: each failed row goes to RETRY, due after its delay,
or to DEAD, and spends its attempts. One row per element of the arrays $1
id, $2 dead, $3 delay in ms, $4 error, $5 attempts spent (failureArgs).
markFailed is lease-fenced (.Fence): it touches only the rows the lease $6
still holds.
*/ -}}
UPDATE {{.Table}} t SET
		status = CASE WHEN f.dead THEN 'DEAD' ELSE 'RETRY' END,
		retry_count = t.retry_count + f.spend,
		next_retry_at = CASE WHEN f.dead THEN NULL ELSE now() + f.delay_ms * interval '1 millisecond' END,
		last_error = f.err, locked_by = NULL, locked_until = NULL
	FROM unnest($1::bigint[], $2::bool[], $3::bigint[], $4::text[], $5::int[]) AS f(id, dead, delay_ms, err, spend)
	WHERE t.id = f.id{{if .Fence}} AND t.locked_by = $6 AND t.status = 'PROCESSING'{{end}}
