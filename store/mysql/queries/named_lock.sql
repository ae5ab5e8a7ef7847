{{/*
namedLock: the named lock ?1, waited for at most ?2 seconds (0: not at all);
1 when taken. Migrations take turns with it, and so do cleanups
(cleanuplock.go).
*/ -}}
SELECT GET_LOCK(?, ?)
