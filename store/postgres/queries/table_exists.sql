{{/*
tableExists: whether the table named $1 exists (the registry of slots,
which only MigrateCDC creates).
*/ -}}
SELECT to_regclass($1) IS NOT NULL
