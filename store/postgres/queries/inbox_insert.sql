{{/*
inboxInsert: the row of a first delivery ($1 event, $2 consumer),
PROCESSING, or with .Processed PROCESSED at once; nothing for an event seen
before. A concurrent delivery of the same event waits on the unique index
until the first transaction ends, then finds the row.
*/ -}}
INSERT INTO {{.Inbox}} (event_id, consumer_name, event_type, status, processed_at, aggregate_type, aggregate_id, aggregate_version, occurred_at)
	VALUES ($1, $2, $3, {{if .Processed}}'PROCESSED', now(){{else}}'PROCESSING', NULL{{end}}, $4, $5, $6, $7) ON CONFLICT (event_id, consumer_name) DO NOTHING
