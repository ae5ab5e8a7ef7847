-- Rows held behind a DEAD event (store.HeldAfter, 2200-01-01 in unix µs;
-- blocking dead letters): the relays' release and the backlog sample find
-- them here; partial, so the write path never touches it.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_held_idx
    ON {{.OutboxName}} (aggregate_type, aggregate_id, id) WHERE status = 'RETRY' AND next_retry_at >= 7258118400000000;
