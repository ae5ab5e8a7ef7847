{{/*
backlog: the backlog sample, with the partial indexes' predicates written
out verbatim (unsent_idx, dead_idx) so the planner answers from them: SQLite
keeps delivered rows in the table as SENT, and the sample must not read
them.
*/ -}}
SELECT
	(SELECT count(*) FROM {{.Table}} WHERE status = 'PENDING' AND {{unsent}}),
	(SELECT count(*) FROM {{.Table}} WHERE status = 'RETRY' AND {{unsent}}),
	(SELECT count(*) FROM {{.Table}} WHERE status = 'PROCESSING' AND {{unsent}}),
	(SELECT min(created_at) FROM {{.Table}} WHERE {{unsent}}),
	(SELECT count(*) FROM {{.Table}} WHERE status = 'DEAD')
