{{/*
slotState: whether the replication slot $1 exists (no row when not) and a
relay reads it.
*/ -}}
SELECT true, active FROM pg_replication_slots WHERE slot_name = $1
