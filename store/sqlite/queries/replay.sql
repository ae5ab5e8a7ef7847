{{/*
replay: the DEAD rows .Where selects go back to PENDING with a fresh
attempt budget.
*/ -}}
UPDATE {{.Table}} SET status = 'PENDING', retry_count = 0, next_retry_at = NULL,
	locked_by = NULL, locked_until = NULL WHERE {{.Where}}
