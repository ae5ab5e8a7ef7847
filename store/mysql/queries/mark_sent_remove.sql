{{/*
markSentRemove: the archived rows (.IDs) leave the hot table.
*/ -}}
DELETE FROM {{.Table}} WHERE id IN ({{.IDs}})
