-- Rows held behind a DEAD event (store.HeldAfter, blocking dead letters):
-- the relays' release and the backlog sample find them here, so that they
-- cost nothing to look for while there are none; partial, so the write
-- path never touches it.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_held_idx
    ON {{.Outbox}} (aggregate_type, aggregate_id, id) WHERE status = 'RETRY' AND next_retry_at >= '2200-01-01 00:00:00+00';
