{{/*
lock: the picked rows, locked, checked again and read in full, with the
lease's end from the database clock (the argument is the lease length in
µs). This is the statement's start: the claim appends the id list and
") ORDER BY t.id FOR UPDATE SKIP LOCKED".
*/ -}}
SELECT {{cols "t"}}, COALESCE({{deliverable "t"}}, 0) AS ok, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
	FROM {{.Table}} t WHERE t.id IN (
