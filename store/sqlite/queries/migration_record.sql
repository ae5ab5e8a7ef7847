{{/*
migrationRecord: migration ?1, named ?2, is applied.
*/ -}}
INSERT INTO {{.Table}}_migrations (version, name) VALUES (?, ?)
