{{/*
stillPending: which of the ids $1 are PENDING rows of the outbox table.
*/ -}}
SELECT id FROM {{.Table}} WHERE id = ANY($1) AND status = 'PENDING'
