{{/*
inboxDone: the delivery's outcome $3, now, with its note $4 (NULL keeps
error_message); the stored event is cleared.
*/ -}}
UPDATE {{.Inbox}} SET status = $3, processed_at = now(), error_message = COALESCE($4, error_message),
	payload = NULL, headers = NULL WHERE {{.InboxKey}}
