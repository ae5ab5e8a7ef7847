-- The admin console filters dead letters by aggregate and pages them by id
-- (newest first). Without this index a rare aggregate among a million
-- dead rows is found by walking the primary key (~450 ms); partial, so rows
-- that never die cost the write path nothing.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_dead_aggregate_idx
    ON {{.Outbox}} (aggregate_type, aggregate_id, id) WHERE status = 'DEAD';
