{{/*
walLevel: the server's wal_level; CDC needs logical.
*/ -}}
SHOW wal_level
