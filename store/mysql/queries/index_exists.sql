{{/*
indexExists: whether index ?3 of table ?2, in database ?1 (empty: the
connection's), exists; MySQL 8 has no CREATE INDEX IF NOT EXISTS.
*/ -}}
SELECT COUNT(*) FROM information_schema.STATISTICS
	WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = ?
