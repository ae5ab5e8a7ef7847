{{/*
floorProbe: the floor's probe (floor.go), in one statement:
- the lowest unsent id this statement's snapshot sees at or above $1, or
  with none, the next id the sequence will hand out;
- whether the floor candidate whose marker, virtual transaction ids and time
  are $2, $3 and $4 has nothing left running;
- the sequence's next id, which falls below the floor when the sequence was
  set back (TRUNCATE ... RESTART IDENTITY);
- the file node of the table $5, which every TRUNCATE changes.
{{.Sequence}} is the id sequence, known only once floor.go has looked it up:
the statement is rendered with the fmt verb %[1]s in its place, which
floor.go fills in. txid_ functions: PostgreSQL 12 has no pg_snapshot_ ones.
*/ -}}
SELECT coalesce((SELECT w.id FROM {{.Table}} w WHERE {{unsent "w"}} AND w.id >= $1 ORDER BY w.id LIMIT 1),
		(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM {{.Sequence}})),
	CASE WHEN $2::bigint IS NULL THEN false
		ELSE txid_snapshot_xmin(txid_current_snapshot()) >= $2::bigint
			AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'virtualxid' AND l.virtualxid = ANY($3::text[]))
			AND NOT EXISTS (SELECT 1 FROM pg_prepared_xacts x WHERE x.prepared >= $4::timestamptz) END,
	(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM {{.Sequence}}),
	coalesce(pg_relation_filenode($5::text::regclass)::bigint, 0)
