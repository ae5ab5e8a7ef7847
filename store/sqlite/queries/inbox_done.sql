{{/*
inboxDone: the delivery's outcome ?1 at ?2 (unix µs), with its note ?3
(NULL keeps error_message); the stored event is cleared.
*/ -}}
UPDATE {{.Inbox}} SET status = ?, processed_at = ?, error_message = COALESCE(?, error_message),
	payload = NULL, headers = NULL WHERE event_id = ? AND consumer_name = ?
