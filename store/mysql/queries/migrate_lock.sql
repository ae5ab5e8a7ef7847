{{/*
migrateLock: the named lock ?1 that makes two processes' migrations take
turns, waited for at most ?2 seconds; 1 when taken.
*/ -}}
SELECT GET_LOCK(?, ?)
