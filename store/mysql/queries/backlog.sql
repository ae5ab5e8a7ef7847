{{/*
backlog: the unsent and DEAD rows of each status, answered from status_idx.
The hot table holds only these and the rows of no other status.
*/ -}}
SELECT status, COUNT(*) FROM {{.Table}}
	WHERE status IN ('PENDING', 'RETRY', 'PROCESSING', 'DEAD') GROUP BY status
