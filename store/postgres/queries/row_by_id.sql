{{/*
rowByID: the outbox row $1.
*/ -}}
SELECT {{.Cols}} FROM {{.Table}} WHERE id = $1
