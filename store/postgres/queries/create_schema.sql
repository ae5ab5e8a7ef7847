{{/*
createSchema: the schema the tables are in (Tables.Schema).
*/ -}}
CREATE SCHEMA IF NOT EXISTS {{.Schema}}
