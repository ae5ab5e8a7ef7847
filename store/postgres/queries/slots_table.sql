{{/*
slotsTable: the registry of the slots CDC relays created, so stats and
metrics report txbox's slots and no one else's.
*/ -}}
CREATE TABLE IF NOT EXISTS {{.Slots}} (
	slot_name     TEXT PRIMARY KEY,
	created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
	confirmed_lsn PG_LSN NULL,
	confirmed_at  TIMESTAMPTZ NULL,
	-- true once a relay delivered the rows older than the slot
	backfilled    BOOLEAN NOT NULL DEFAULT false,
	-- the highest id that delivery took from the table: the log may
	-- bring those rows again, and one no longer in the table is skipped
	backfill_max_id BIGINT NOT NULL DEFAULT 0,
	-- the log position when it ended: later commits were not in it
	backfill_end_lsn PG_LSN NULL)
