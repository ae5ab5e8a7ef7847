{{/*
migrateUnlock: the named lock ?1 is released.
*/ -}}
SELECT RELEASE_LOCK(?)
