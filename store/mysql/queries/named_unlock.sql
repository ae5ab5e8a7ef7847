{{/*
namedUnlock: the named lock ?1 is released; 1 when this session held it.
*/ -}}
SELECT RELEASE_LOCK(?)
