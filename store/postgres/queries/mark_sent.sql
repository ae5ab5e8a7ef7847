{{/*
markSent, txSent: delivered rows ($1) leave the outbox in one statement,
moved into the archive with status SENT, or deleted with .DeleteSent.
markSent is lease-fenced (.Fence): it touches only the rows the lease $2
still holds. txSent's rows are held by its own transaction.
*/ -}}
{{if .DeleteSent -}}
DELETE FROM {{.Table}} WHERE id = ANY($1){{if .Fence}} AND locked_by = $2 AND status = 'PROCESSING'{{end}}
{{- else -}}
WITH d AS (DELETE FROM {{.Table}} WHERE id = ANY($1){{if .Fence}} AND locked_by = $2 AND status = 'PROCESSING'{{end}} RETURNING *)
INSERT INTO {{.Sent}} (id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers,
	status, retry_count, next_retry_at, locked_by, locked_until, occurred_at, created_at, sent_at, last_error)
SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, headers,
	'SENT', retry_count, NULL, NULL, NULL, occurred_at, created_at, now(), last_error FROM d
{{- end}}
