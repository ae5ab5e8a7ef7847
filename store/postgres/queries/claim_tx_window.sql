{{/*
txClaim, txChain: the transaction claim's fast path. The window's candidates
(window.sql) are locked (lock.sql) and returned as they are: the open
transaction is the lease. txChain (.Chain) also takes the rows behind this
store's held ones.
$1 limit, $2 window size, $3 held ids, $4 floor, $5 split argument.
*/ -}}
WITH {{split "$5"}}, {{template "window" .}}{{template "lock" .}}
SELECT * FROM final ORDER BY id
