{{/*
markSentDelete: with DeleteSent, the delivered rows (.IDs) that the lease
(the last argument) still holds are deleted.
*/ -}}
DELETE FROM {{.Table}} WHERE id IN ({{.IDs}}) AND locked_by = ? AND status = 'PROCESSING'
