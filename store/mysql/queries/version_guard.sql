{{/*
versionGuard: InboxVersion's first step makes sure the aggregate's row
exists and is locked, created at a version below any (?4), without a
duplicate-key error and without a gap lock a concurrent first version of
the same aggregate could deadlock on.
*/ -}}
INSERT INTO {{.Inbox}}_versions (consumer_name, aggregate_type, aggregate_id, version, updated_at)
	VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = version
