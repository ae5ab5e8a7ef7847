{{/*
cleanup: at most ?2 SENT rows sent before ?1 (unix µs) are deleted, in one
short write transaction, so the relay's claims get the write lock between
batches.
*/ -}}
DELETE FROM {{.Table}} WHERE id IN (
	SELECT id FROM {{.Table}} WHERE status = 'SENT' AND sent_at < ? LIMIT ?)
