{{/*
backlog: the backlog sample, with the partial indexes' predicates written
out verbatim (unsent_idx, dead_idx), which is what lets the planner answer
from them: the cost follows the backlog, not the delivered rows that stay
in the table (rows marked SENT in place before 003_sent_archive.sql, or a
table an operator refilled). The age of the oldest unsent row is in ms.
*/ -}}
SELECT
	count(*) FILTER (WHERE status = 'PENDING'),
	count(*) FILTER (WHERE status = 'RETRY'),
	count(*) FILTER (WHERE status = 'PROCESSING'),
	COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)) * 1000, 0)::float8,
	(SELECT count(*) FROM {{.Table}} WHERE status = 'DEAD')
FROM {{.Table}} WHERE status IN ('PENDING', 'RETRY', 'PROCESSING')
