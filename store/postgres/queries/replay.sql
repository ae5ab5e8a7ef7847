{{/*
replay: the DEAD rows .Where selects go back to PENDING with a fresh
attempt budget and a new id from the table's sequence (.TableParam holds the
table's name), so each joins the queue at its end: a claim reads only from
its floor up (floor.go), and an old id lies below it. The event id, which
consumers deduplicate on, stays. Every row of a replayed row's aggregate
from it on that is not delivered (unsent or DEAD) gets a new id too, in
their old order, so the replayed row stays ahead of the rows held behind it
(blocking dead letters) and of the rest of its aggregate. The result is the
number of rows replayed.
*/ -}}
WITH dead AS (
	SELECT id, aggregate_type, aggregate_id FROM {{.Table}} WHERE {{.Where}}
), firsts AS (
	SELECT aggregate_type, aggregate_id, min(id) AS first_id FROM dead GROUP BY 1, 2
), moved AS (
	SELECT o.id, o.replayed, nextval(pg_get_serial_sequence({{.TableParam}}, 'id')) AS new_id
	FROM (SELECT e.id, d.id IS NOT NULL AS replayed
		FROM firsts f JOIN {{.Table}} e ON e.aggregate_type = f.aggregate_type AND e.aggregate_id = f.aggregate_id
			AND e.id >= f.first_id AND e.status IN ('PENDING', 'RETRY', 'PROCESSING', 'DEAD')
		LEFT JOIN dead d ON d.id = e.id
		ORDER BY e.id OFFSET 0) o
), done AS (
	UPDATE {{.Table}} t SET id = m.new_id,
		status = CASE WHEN m.replayed THEN 'PENDING' ELSE t.status END,
		retry_count = CASE WHEN m.replayed THEN 0 ELSE t.retry_count END,
		next_retry_at = CASE WHEN m.replayed THEN NULL ELSE t.next_retry_at END,
		locked_by = CASE WHEN m.replayed THEN NULL ELSE t.locked_by END,
		locked_until = CASE WHEN m.replayed THEN NULL ELSE t.locked_until END
	FROM moved m WHERE t.id = m.id
	RETURNING m.replayed
)
SELECT count(*) FILTER (WHERE replayed) FROM done
