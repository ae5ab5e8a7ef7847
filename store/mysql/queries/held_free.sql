{{/*
heldFree: the held rows (store.HeldAfter) behind no DEAD row of their
aggregate whose type blocks (the first argument: every type; else those in
the JSON array of the second); release_held.sql then releases them. The
RETRY rows are few and found through status_idx. Read without locks (a
locking read would lock every RETRY row it passes): a row released just as
a DEAD row appears ahead of it is held again by the relay that claims it.
*/ -}}
SELECT h.id FROM {{.Table}} h
WHERE h.status = 'RETRY' AND h.next_retry_at >= '2200-01-01 00:00:00'
  AND NOT EXISTS (SELECT 1 FROM {{.Table}} d
	WHERE d.aggregate_type = h.aggregate_type AND d.aggregate_id = h.aggregate_id AND d.id < h.id
	  AND d.status = 'DEAD' AND (? OR JSON_CONTAINS(?, JSON_QUOTE(d.aggregate_type))))
