{{/*
replay: InboxReplay, the rows .Where selects become REPLAY with a fresh
attempt budget, never a parked undecodable message (event type .Param).
The caller makes .Where select DEAD rows only.
*/ -}}
UPDATE {{.Table}} SET status = 'REPLAY', retry_count = 0 WHERE event_type <> {{.Param}} AND {{.Where}}
