{{/*
countCleanup: how many rows cleanup.sql would delete for the cut-off ?1.
*/ -}}
SELECT count(*) FROM {{.Table}} WHERE status = 'SENT' AND sent_at < ?
