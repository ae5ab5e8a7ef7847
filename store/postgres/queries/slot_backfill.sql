{{/*
slotBackfill: how far the rows older than the slot $1 were delivered.
*/ -}}
SELECT backfilled, backfill_max_id, backfill_end_lsn::text FROM {{.Slots}} WHERE slot_name = $1
