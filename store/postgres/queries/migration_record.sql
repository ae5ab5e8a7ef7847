{{/*
migrationRecord: migration $1, named $2, is applied, in the transaction
that applied it.
*/ -}}
INSERT INTO {{.Table}}_migrations (version, name) VALUES ($1, $2)
