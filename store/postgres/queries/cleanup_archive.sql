{{/*
cleanupArchive: at most $2 archived rows sent more than $1 ms ago are
deleted. The archive's id is not unique (a reused id, 004_*.sql): rows are
picked by their physical address. SKIP LOCKED keeps it out of the relay's
way.
*/ -}}
DELETE FROM {{.Sent}} WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM {{.Sent}} WHERE sent_at < now() - $1 * interval '1 millisecond'
	LIMIT $2 FOR UPDATE SKIP LOCKED))
