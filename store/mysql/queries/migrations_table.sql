{{/*
migrationsTable: the versions of the migrations applied, created before
the first one runs.
*/ -}}
CREATE TABLE IF NOT EXISTS {{.Table}}_migrations (
	version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL,
	applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
