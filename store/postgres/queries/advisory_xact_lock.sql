{{/*
advisoryXactLock: the advisory lock named $1, held until the transaction
ends: two processes migrating at once take turns.
*/ -}}
SELECT pg_advisory_xact_lock(hashtext($1))
