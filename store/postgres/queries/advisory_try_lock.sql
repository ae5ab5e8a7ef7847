{{/*
advisoryTryLock: the session advisory lock named $1 if no session holds it,
without waiting; true when taken. Held until advisory_unlock.sql or the
session's end.
*/ -}}
SELECT pg_try_advisory_lock(hashtext($1))
