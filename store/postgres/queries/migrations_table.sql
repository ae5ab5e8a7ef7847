{{/*
migrationsTable: the versions of the migrations applied, created before
the first one runs.
*/ -}}
CREATE TABLE IF NOT EXISTS {{.Table}}_migrations (
	version INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
