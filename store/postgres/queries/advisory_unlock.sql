{{/*
advisoryUnlock: the session advisory lock named $1 is released.
*/ -}}
SELECT pg_advisory_unlock(hashtext($1))
