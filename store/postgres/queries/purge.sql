{{/*
purge: the DEAD rows .Where selects are deleted.
*/ -}}
DELETE FROM {{.Table}} WHERE {{.Where}}
