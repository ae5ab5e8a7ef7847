{{/*
markSent: the delivered rows (?1, a JSON array of ids) that the lease ?2
still holds are marked SENT at ?3 (now, unix µs) and stay in the table, or
are deleted with .DeleteSent.
*/ -}}
{{if .DeleteSent -}}
DELETE FROM {{.Table}} WHERE id IN (SELECT value FROM json_each(?1)) AND locked_by = ?2 AND status = 'PROCESSING'
{{- else -}}
UPDATE {{.Table}} SET status = 'SENT', sent_at = ?3, locked_by = NULL, locked_until = NULL,
			next_retry_at = NULL WHERE id IN (SELECT value FROM json_each(?1)) AND locked_by = ?2 AND status = 'PROCESSING'
{{- end}}
