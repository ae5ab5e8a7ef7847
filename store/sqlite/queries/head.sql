{{/*
head: the rows that are the first unsent row of their aggregate and
deliverable at .Now; the FROM and WHERE of probe.sql and of claim.sql's
heads. An aggregate whose first unsent row waits in RETRY or is leased to
another relay has no head, so nothing of it is taken: that is how a failing
event blocks only its own aggregate.
*/}}
{{define "head" -}}
FROM {{.Table}} o
	WHERE {{unsent "o"}} AND {{deliverable "o" .Now}}
	  AND NOT EXISTS (
		SELECT 1 FROM {{.Table}} e
		WHERE e.aggregate_type = o.aggregate_type AND e.aggregate_id = o.aggregate_id
		  AND e.id < o.id AND {{unsent "e"}})
{{- end}}
