{{/*
release_held: the held rows (held_idx) behind no DEAD row of their aggregate
whose type blocks ($1: every type; else those in $2) go back to PENDING
(retry_count kept): a CDC reader delivers a row an UPDATE makes PENDING.
*/ -}}
UPDATE {{.Table}} h SET status = 'PENDING', next_retry_at = NULL
WHERE h.status = 'RETRY' AND h.next_retry_at >= '2200-01-01 00:00:00+00'
  AND NOT EXISTS (SELECT 1 FROM {{.Table}} d
	WHERE d.aggregate_type = h.aggregate_type AND d.aggregate_id = h.aggregate_id AND d.id < h.id
	  AND d.status = 'DEAD' AND ($1 OR d.aggregate_type = ANY($2::text[])))
