{{/*
horizon: the age in µs of the oldest InnoDB transaction other than this
session's (one with a read view holds back the purge of old row versions),
who holds it, and the history list length: undo records of the whole
server not yet purged. Needs the PROCESS privilege.
*/ -}}
SELECT coalesce(TIMESTAMPDIFF(MICROSECOND, o.trx_started, NOW(6)), 0) AS oldest_us,
	coalesce(o.holder, '') AS holder,
	coalesce((SELECT `count` FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'), 0) AS history
FROM (SELECT 1 AS one) one LEFT JOIN (
	SELECT t.trx_started, CONCAT('thread ', t.trx_mysql_thread_id, ', user ', coalesce(p.USER, '?'),
		', client ', coalesce(p.HOST, '?'), ', ', coalesce(t.trx_state, '?')) AS holder
	FROM information_schema.innodb_trx t LEFT JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id
	WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
	ORDER BY t.trx_started LIMIT 1) o ON true
