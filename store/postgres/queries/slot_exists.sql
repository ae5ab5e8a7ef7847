{{/*
slotExists: whether PostgreSQL has the replication slot $1.
*/ -}}
SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)
