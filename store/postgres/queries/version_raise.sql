{{/*
versionRaise: InboxVersion's check-and-set, an upsert whose DO UPDATE
fires only for a higher version; no row returned means stale.
*/ -}}
INSERT INTO {{.Inbox}}_versions AS v (consumer_name, aggregate_type, aggregate_id, version) VALUES ($1, $2, $3, $4)
	ON CONFLICT (consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
	WHERE v.version < EXCLUDED.version
	RETURNING version
