{{/*
migrationApplied: whether migration $1 is recorded.
*/ -}}
SELECT EXISTS (SELECT 1 FROM {{.Table}}_migrations WHERE version = $1)
