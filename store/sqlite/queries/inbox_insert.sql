{{/*
inboxInsert: InboxAcquire's first statement, the row of a first delivery,
PROCESSING. The conflict target names the primary key, so only a duplicate
key is absorbed; any other constraint failure is still an error (INSERT OR
IGNORE would swallow NOT NULL and CHECK failures too). Being a write, it
takes the write lock before the transaction reads anything.
*/ -}}
INSERT INTO {{.Inbox}} (event_id, consumer_name, event_type, status, received_at,
		aggregate_type, aggregate_id, aggregate_version, occurred_at)
	VALUES (?, ?, ?, 'PROCESSING', ?, ?, ?, ?, ?)
	ON CONFLICT (event_id, consumer_name) DO NOTHING
