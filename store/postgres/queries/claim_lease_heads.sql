{{/*
claim: the lease claim's fallback, run when the window was full of rows that
could not be taken: the heads' candidates (heads.sql), locked (lock.sql) and
leased (lease.sql).
$1 limit, $2 run length, $3 lease owner, $4 lease length in ms, $5 split
argument.
*/ -}}
WITH {{split "$5"}}, {{template "heads" .}}{{template "lock" .}}
{{template "lease" .}}
