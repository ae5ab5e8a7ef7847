{{/*
emitEvents: one logical decoding message per event body of $3, in the
array's order, inside the caller's transaction; each with the prefix $1
and its own id from the sequence of the outbox table $2, then a newline,
then the body (emit.go has the format).
*/ -}}
SELECT pg_logical_emit_message(true, $1,
	nextval(pg_get_serial_sequence($2, 'id'))::text || E'\n' || m) FROM unnest($3::text[]) AS m
