{{/*
dropSlot: the replication slot $1 is dropped.
*/ -}}
SELECT pg_drop_replication_slot($1)
