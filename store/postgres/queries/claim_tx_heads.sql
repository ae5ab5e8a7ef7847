{{/*
txHeads: the transaction claim's fallback, run when the window was full of
rows that could not be taken: the heads' candidates (heads.sql), locked
(lock.sql) and returned as they are.
$1 limit, $2 run length, $3 split argument.
*/ -}}
WITH {{split "$3"}}, {{template "heads" .}}{{template "lock" .}}
SELECT * FROM final ORDER BY id
