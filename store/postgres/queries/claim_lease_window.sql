{{/*
claimScan: the lease claim's fast path: the window's candidates (window.sql),
locked (lock.sql) and leased (lease.sql). Every claim sees only this store's
share of the aggregates (split.go).
$1 limit, $2 window size, $3 lease owner, $4 lease length in ms, $5 split
argument. No held rows and no floor.
*/ -}}
WITH {{split "$5"}}, {{template "window" .}}{{template "lock" .}}
{{template "lease" .}}
