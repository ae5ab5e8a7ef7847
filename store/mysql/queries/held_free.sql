{{/*
heldFree: the held rows (store.HeldAfter) behind no DEAD row of their
aggregate whose type blocks (the first argument: every type; else those in
the JSON array of the second), locked; release_held.sql then makes them
due. The RETRY rows are few and found through status_idx.
*/ -}}
SELECT h.id FROM {{.Table}} h
WHERE h.status = 'RETRY' AND h.next_retry_at >= '2200-01-01 00:00:00'
  AND NOT EXISTS (SELECT 1 FROM {{.Table}} d
	WHERE d.aggregate_type = h.aggregate_type AND d.aggregate_id = h.aggregate_id AND d.id < h.id
	  AND d.status = 'DEAD' AND (? OR JSON_CONTAINS(?, JSON_QUOTE(d.aggregate_type))))
FOR UPDATE
