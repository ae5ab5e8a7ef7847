{{/*
migrationApplied: whether migration ?1 is recorded (a count, 0 or 1).
*/ -}}
SELECT count(*) FROM {{.Table}}_migrations WHERE version = ?
