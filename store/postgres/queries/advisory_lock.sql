{{/*
advisoryLock: the session advisory lock named $1, held until
advisory_unlock.sql or the session's end.
*/ -}}
SELECT pg_advisory_lock(hashtext($1))
