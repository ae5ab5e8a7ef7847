{{/*
versionRaise: the check-and-set, raising the version to ?1 if it is below
(?5). Its WHERE is the check, so its count means "raised" with or without
clientFoundRows (found and changed rows are the same rows).
*/ -}}
UPDATE {{.Inbox}}_versions SET version = ?, updated_at = UTC_TIMESTAMP(6)
	WHERE consumer_name = ? AND aggregate_type = ? AND aggregate_id = ? AND version < ?
