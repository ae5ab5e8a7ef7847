{{/*
inboxFail: one upsert records a failed delivery: the first failure inserts
the row (DEAD at once with a budget ?4 of 1, else ?5, RETRY or REPLAY), a
later one spends another attempt. The values of the update come again after
the insert's: the budget and status, then the event's fields.

ON DUPLICATE KEY UPDATE has no WHERE, so every assignment carries the guard
"unless PROCESSED or SKIPPED" itself (keep). Order-proof: status is
assigned first, from the old retry_count + 1 (retry_count is assigned after
it, so it is the old value under either evaluation order); every later
guard reads status, which is new under left-to-right evaluation, but the
new status is PROCESSED/SKIPPED exactly when the old one was (the new one
is RETRY, REPLAY or DEAD), so the guards agree.
*/ -}}
{{define "keep"}}{{.}} = IF(status IN ('PROCESSED', 'SKIPPED'), {{.}}, ?){{end -}}
INSERT INTO {{.Inbox}} (event_id, consumer_name, event_type, status, received_at, retry_count, error_message,
		aggregate_type, aggregate_id, aggregate_version, occurred_at, headers, payload)
	VALUES (?, ?, ?, IF(1 >= ?, 'DEAD', ?), UTC_TIMESTAMP(6), 1, ?, ?, ?, ?, ?, ?, ?)
	ON DUPLICATE KEY UPDATE
		status = IF(status IN ('PROCESSED', 'SKIPPED'), status, IF(retry_count + 1 >= ?, 'DEAD', ?)),
		retry_count = IF(status IN ('PROCESSED', 'SKIPPED'), retry_count, retry_count + 1),
		{{template "keep" "error_message"}}, {{template "keep" "aggregate_type"}}, {{template "keep" "aggregate_id"}},
		{{template "keep" "aggregate_version"}}, {{template "keep" "occurred_at"}}, {{template "keep" "headers"}}, {{template "keep" "payload"}}
