{{/*
lease: the claimed rows (.IDs) are PROCESSING, leased to ?1 until ?2.
*/ -}}
UPDATE {{.Table}} SET status = 'PROCESSING', locked_by = ?, locked_until = ?
	WHERE id IN ({{.IDs}})
