{{/*
slotLags: each registered slot, whether PostgreSQL still has it and a
relay reads it, the bytes of log it holds unconfirmed and the seconds
since its reader last confirmed a position.
*/ -}}
SELECT r.slot_name, s.slot_name IS NOT NULL, coalesce(s.active, false),
	coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::bigint,
	coalesce(EXTRACT(EPOCH FROM now() - coalesce(r.confirmed_at, r.created_at)), 0)::float8
	FROM {{.Slots}} r LEFT JOIN pg_replication_slots s ON s.slot_name = r.slot_name
	ORDER BY r.slot_name
