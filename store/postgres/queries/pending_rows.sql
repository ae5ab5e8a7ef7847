{{/*
pendingRows: up to $2 undelivered rows with ids above $1, in id order: what
the table held before a CDC relay's slot existed.
*/ -}}
SELECT {{.Cols}} FROM {{.Table}}
	WHERE status IN ('PENDING', 'RETRY', 'PROCESSING') AND id > $1 ORDER BY id LIMIT $2
