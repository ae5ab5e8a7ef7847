{{/*
cdcReady: whether the publication $1 and the registry of slots ($2, the
table's name) exist: what MigrateCDC creates.
*/ -}}
SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1), to_regclass($2) IS NOT NULL
