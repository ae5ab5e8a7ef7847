{{/*
horizon: the age in ms of the oldest transaction of this database that
holds back the cleanup of dead rows (it has a snapshot or an id), other
than this session, and who holds it; and the dead tuples of the outbox's
tables. From PostgreSQL's own views, which any session may read.
*/ -}}
SELECT coalesce(extract(epoch FROM now() - o.xact_start) * 1000, 0)::float8 AS oldest_ms,
	coalesce(o.holder, '') AS holder,
	coalesce((SELECT sum(n_dead_tup) FROM pg_stat_user_tables
		WHERE relid IN (to_regclass('{{.Table}}'), to_regclass('{{.Sent}}'), to_regclass('{{.Inbox}}'))), 0)::int8 AS dead_rows
FROM (SELECT) one LEFT JOIN LATERAL (
	SELECT a.xact_start, format('pid %s, application %L, client %s, %s', a.pid, a.application_name,
		coalesce(host(a.client_addr), 'local'), a.state) AS holder
	FROM pg_stat_activity a
	WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
		AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
	ORDER BY a.xact_start LIMIT 1) o ON true
