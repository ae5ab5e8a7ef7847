{{/*
inboxInsertBatch: the rows of many first deliveries for the consumer $1,
PROCESSED at once (.Rows, each processedRow), and the ids of those
inserted, as one JSON array: store.Tx reads one row, and this works for pgx
and database/sql alike.
*/ -}}
WITH ins AS (INSERT INTO {{.Inbox}} (event_id, consumer_name, event_type, status, processed_at, aggregate_type, aggregate_id, aggregate_version, occurred_at) VALUES {{.Rows}} ON CONFLICT (event_id, consumer_name) DO NOTHING RETURNING event_id) SELECT COALESCE(json_agg(event_id), '[]')::text FROM ins
