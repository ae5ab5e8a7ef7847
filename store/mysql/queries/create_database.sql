{{/*
createDatabase: the database the tables are in (Tables.Schema).
*/ -}}
CREATE DATABASE IF NOT EXISTS {{.Schema}}
