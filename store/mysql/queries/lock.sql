{{/*
lock: the picked rows (.IDs), locked, checked again and read in full, with
the lease's end from the database clock (the first argument is the lease
length in µs). SKIP LOCKED: a row another claimer's scan holds for a moment
is left out, which ends its aggregate's run there.
*/ -}}
SELECT {{cols "t"}}, COALESCE({{deliverable "t"}}, 0) AS ok, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
	FROM {{.Table}} t WHERE t.id IN ({{.IDs}}) ORDER BY t.id FOR UPDATE SKIP LOCKED
