{{/*
createSlot: a logical replication slot $1 for the pgoutput plugin.
*/ -}}
SELECT pg_create_logical_replication_slot($1, 'pgoutput')
