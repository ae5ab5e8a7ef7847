{{/*
txClaim, txChain: the transaction claim's fast path. The window's candidates
(window.sql) are locked (lock.sql) and returned as they are: the open
transaction is the lease. txChain (.Chain) also takes the rows behind this
store's held ones.
$1 limit, $2 window size, $3 held ids, $4 floor, $5 split argument.
window_full says whether the window was full (as windowFull does), which a
short claim needs to know: it saves that claim a round trip.
*/ -}}
WITH {{split "$5"}}, {{template "window" .}}{{template "lock" .}}
SELECT f.*, (SELECT count(*) FROM win0) = $2 AS window_full FROM final f ORDER BY f.id
