{{/*
markFailed: each failed row that the lease ?2 still holds goes to RETRY, due
?3 (now, unix µs) plus its delay, or to DEAD, and spends its attempts. ?1 is
a JSON array of {id, dead, delay, err, spend}.
*/ -}}
UPDATE {{.Table}} AS t SET
		status = CASE WHEN f.dead THEN 'DEAD' ELSE 'RETRY' END,
		retry_count = t.retry_count + f.spend,
		next_retry_at = CASE WHEN f.dead THEN NULL ELSE ?3 + f.delay END,
		last_error = f.err, locked_by = NULL, locked_until = NULL
	FROM (SELECT value ->> 'id' AS id, value ->> 'dead' AS dead, value ->> 'delay' AS delay, value ->> 'err' AS err, value ->> 'spend' AS spend
		FROM json_each(?1)) AS f
	WHERE t.id = f.id AND t.locked_by = ?2 AND t.status = 'PROCESSING'
