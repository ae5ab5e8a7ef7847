{{/*
notify: one notification on the channel $1, delivered at COMMIT.
*/ -}}
SELECT pg_notify($1, '')
