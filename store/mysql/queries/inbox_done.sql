{{/*
inboxDone: the delivery's outcome ?1, now, with its note ?2 (NULL keeps
error_message); the stored event is cleared.
*/ -}}
UPDATE {{.Inbox}} SET status = ?, processed_at = UTC_TIMESTAMP(6), error_message = COALESCE(?, error_message),
	payload = NULL, headers = NULL WHERE event_id = ? AND consumer_name = ?
