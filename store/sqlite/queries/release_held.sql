{{/*
releaseHeld: the held rows (held_idx) behind no DEAD row of their aggregate
whose type blocks (?1: every type; else those in the JSON array ?2) go back
to PENDING (retry_count kept).
*/ -}}
UPDATE {{.Table}} AS h SET status = 'PENDING', next_retry_at = NULL
WHERE h.status = 'RETRY' AND h.next_retry_at >= 7258118400000000
  AND NOT EXISTS (SELECT 1 FROM {{.Table}} d
	WHERE d.aggregate_type = h.aggregate_type AND d.aggregate_id = h.aggregate_id AND d.id < h.id
	  AND d.status = 'DEAD' AND (?1 OR d.aggregate_type IN (SELECT value FROM json_each(?2))))
