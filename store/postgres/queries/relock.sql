{{/*
relock: FinishIsolating (isolate.go) locks its claim's rows $1 again in a new
transaction after the one whose mark was refused rolled back; rows another
claim took meanwhile are left to it.
*/ -}}
SELECT r.id FROM {{.Table}} r WHERE r.id = ANY($1) AND {{unsent "r"}} FOR UPDATE SKIP LOCKED
