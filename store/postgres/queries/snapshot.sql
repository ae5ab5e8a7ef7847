{{/*
snapshot: a new snapshot's xmax and running transactions, as full
(epoch-carrying) xids.
*/ -}}
SELECT pg_snapshot_xmax(c)::text::bigint,
	ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(c) x) FROM pg_current_snapshot() c
