{{/*
heads: the first unsent row of each aggregate, if it is deliverable, oldest
first, locked with SKIP LOCKED so that concurrent claimers split the work.
An aggregate whose first unsent row waits in RETRY or is leased to another
relay has no head, so nothing of it is taken: that is how a failing event
blocks only its own aggregate, across relay processes.

"First unsent row" is a scalar MIN() subquery rather than NOT EXISTS: MySQL 8
may turn NOT EXISTS into an antijoin, and the locking clause, SKIP LOCKED
included, would then apply to the earlier rows it reads, making a row leased
in a concurrent claim look absent. A subquery that stays a subquery is a
plain consistent read. FORCE INDEX because the hot table is small and its
statistics swing; the plan must not. The argument is the claim's limit.
*/ -}}
SELECT o.id, o.aggregate_type, o.aggregate_id
	FROM {{.Table}} o FORCE INDEX (unsent_idx)
	WHERE o.unsent = 1 AND {{deliverable "o"}}
	  AND o.id = (
		SELECT MIN(e.id) FROM {{.Table}} e FORCE INDEX (aggregate_unsent_idx)
		WHERE e.aggregate_type = o.aggregate_type AND e.aggregate_id = o.aggregate_id AND e.unsent = 1)
	ORDER BY o.id
	LIMIT ?
	FOR UPDATE SKIP LOCKED
