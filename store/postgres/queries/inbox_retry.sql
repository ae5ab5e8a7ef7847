{{/*
inboxRetry: a row to run again (RETRY, REPLAY) is PROCESSING for this
delivery, or with .Processed PROCESSED at once, the stored event cleared.
*/ -}}
UPDATE {{.Inbox}} SET {{if .Processed}}status = 'PROCESSED', processed_at = now(), payload = NULL, headers = NULL{{else}}status = 'PROCESSING'{{end}} WHERE {{.InboxKey}}
