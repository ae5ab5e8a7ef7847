{{/*
inboxRetry: a row to run again (RETRY, REPLAY) is PROCESSING for this
delivery.
*/ -}}
UPDATE {{.Inbox}} SET status = 'PROCESSING' WHERE event_id = ? AND consumer_name = ?
