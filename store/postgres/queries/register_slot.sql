{{/*
registerSlot: the slot $1 is a CDC relay's; $2 says the rows older than it
are delivered, up to id $3, and then the log position now is where that
delivery ended. A slot registered before keeps what it has of these.
*/ -}}
INSERT INTO {{.Slots}} (slot_name, confirmed_at, backfilled, backfill_max_id, backfill_end_lsn)
	VALUES ($1, now(), $2, $3, CASE WHEN $2 THEN pg_current_wal_lsn() END)
	ON CONFLICT (slot_name) DO UPDATE SET backfilled = {{.Slots}}.backfilled OR EXCLUDED.backfilled,
		backfill_max_id = greatest({{.Slots}}.backfill_max_id, EXCLUDED.backfill_max_id),
		backfill_end_lsn = coalesce({{.Slots}}.backfill_end_lsn, EXCLUDED.backfill_end_lsn)
