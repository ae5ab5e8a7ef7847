{{/*
versionRaise: InboxVersion's check-and-set, an upsert whose DO UPDATE
fires only for a higher version; no row returned means stale.
*/ -}}
INSERT INTO {{.Inbox}}_versions AS v (consumer_name, aggregate_type, aggregate_id, version, updated_at)
	VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
	WHERE v.version < excluded.version
	RETURNING version
