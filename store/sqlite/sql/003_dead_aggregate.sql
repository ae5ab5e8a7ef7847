-- The admin console filters dead letters by aggregate and pages them by id;
-- partial, so rows that never die cost the write path nothing.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_dead_aggregate_idx
    ON {{.OutboxName}} (aggregate_type, aggregate_id, id) WHERE status = 'DEAD';
