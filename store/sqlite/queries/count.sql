{{/*
count: how many rows .Where selects; what List pages through.
*/ -}}
SELECT count(*) FROM {{.Table}} WHERE {{.Where}}
