{{/*
migrationsTable: the versions of the migrations applied, created before
the first one runs.
*/ -}}
CREATE TABLE IF NOT EXISTS {{.Table}}_migrations (
	version INTEGER PRIMARY KEY, name TEXT NOT NULL,
	applied_at INTEGER NOT NULL DEFAULT ({{nowMicros}}))
