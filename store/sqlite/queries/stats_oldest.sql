{{/*
statsOldest: when the oldest unsent row was written (unix µs), on the
partial index unsent_idx.
*/ -}}
SELECT min(created_at) FROM {{.Table}} WHERE {{unsent}}
