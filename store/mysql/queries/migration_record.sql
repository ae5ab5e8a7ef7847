{{/*
migrationRecord: migration ?1, named ?2, is applied; recorded only after
all its statements succeeded.
*/ -}}
INSERT INTO {{.Table}}_migrations (version, name) VALUES (?, ?)
