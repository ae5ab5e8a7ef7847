{{/*
inboxAcquire: the row of a first delivery, PROCESSING, or, on a duplicate
key, an exclusive lock on the existing row, turning a RETRY or REPLAY row
into PROCESSING on the way. A concurrent delivery of the same event waits
on that lock until the first transaction ends. inbox.go says why not INSERT
IGNORE and why the rows-affected count alone decides nothing.
*/ -}}
INSERT INTO {{.Inbox}} (event_id, consumer_name, event_type, status, received_at,
		aggregate_type, aggregate_id, aggregate_version, occurred_at)
	VALUES (?, ?, ?, 'PROCESSING', UTC_TIMESTAMP(6), ?, ?, ?, ?)
	ON DUPLICATE KEY UPDATE status = IF(status IN ('RETRY', 'REPLAY'), 'PROCESSING', status)
