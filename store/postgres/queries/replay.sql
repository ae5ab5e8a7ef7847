{{/*
replay: the DEAD rows .Where selects go back to PENDING with a fresh
attempt budget and a new id from the table's sequence (in the rows' old
order; .TableParam holds the table's name), so each joins the queue at its
end: a claim reads only from its floor up (floor.go), and an old id lies
below it. The event id, which consumers deduplicate on, stays.
*/ -}}
UPDATE {{.Table}} t SET id = coalesce(n.new_id, t.id),
	status = 'PENDING', retry_count = 0, next_retry_at = NULL, locked_by = NULL, locked_until = NULL
FROM (SELECT o.id, nextval(pg_get_serial_sequence({{.TableParam}}, 'id')) AS new_id
	FROM (SELECT id FROM {{.Table}} WHERE {{.Where}} ORDER BY id OFFSET 0) o) n
WHERE t.id = n.id
