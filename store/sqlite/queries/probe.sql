{{/*
probe: whether any row is claimable at ?1 (now, unix µs). It runs outside
the write transaction (a WAL read never waits), so with nothing claimable no
write lock is taken.
*/ -}}
SELECT 1 {{template "head" .}} LIMIT 1
