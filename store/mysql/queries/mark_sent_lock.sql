{{/*
markSentLock: the first step of archiving delivered rows: of .IDs, the rows
the lease (the last argument) still holds, locked in id order. Only these
move.
*/ -}}
SELECT id FROM {{.Table}} WHERE id IN ({{.IDs}}) AND locked_by = ? AND status = 'PROCESSING' ORDER BY id FOR UPDATE
