{{/*
confirmSlot: the slot $1 is about to confirm the log position $2.
*/ -}}
UPDATE {{.Slots}} SET confirmed_lsn = $2::pg_lsn, confirmed_at = now() WHERE slot_name = $1
