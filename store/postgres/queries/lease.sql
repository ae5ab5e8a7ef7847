{{/*
lease: the end of a lease claim. The locked rows (lock.sql) are leased: the
lease is written into the rows, so the claim commits at once and the lease
outlives the statement. $3 lease owner, $4 lease length in ms.
*/}}
{{define "lease" -}}
UPDATE {{.Table}} t
SET status = 'PROCESSING', locked_by = $3, locked_until = now() + $4 * interval '1 millisecond'
WHERE t.id = ANY(ARRAY(SELECT id FROM final))
RETURNING {{cols "t"}}
{{- end}}
