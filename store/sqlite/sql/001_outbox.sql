-- Timestamps are INTEGER unix microseconds, UTC: they compare and sort as
-- numbers, keep the precision the relay writes, and need no parsing. A
-- producer that leaves created_at / occurred_at out gets the SQLite clock,
-- which has millisecond resolution (stored as microseconds).
CREATE TABLE IF NOT EXISTS {{.Outbox}} (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id          TEXT    NOT NULL,
    aggregate_type    TEXT    NOT NULL,
    aggregate_id      TEXT    NOT NULL,
    aggregate_version INTEGER NOT NULL DEFAULT 0,
    event_type        TEXT    NOT NULL,
    payload           TEXT    NOT NULL,
    headers           TEXT    NULL,
    status            TEXT    NOT NULL DEFAULT 'PENDING',
    retry_count       INTEGER NOT NULL DEFAULT 0,
    next_retry_at     INTEGER NULL,
    locked_by         TEXT    NULL,
    locked_until      INTEGER NULL,
    occurred_at       INTEGER NOT NULL DEFAULT ({{.NowMicros}}),
    created_at        INTEGER NOT NULL DEFAULT ({{.NowMicros}}),
    sent_at           INTEGER NULL,
    last_error        TEXT    NULL,
    CONSTRAINT {{.OutboxName}}_event_id_key UNIQUE (event_id),
    CONSTRAINT {{.OutboxName}}_status_check CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'RETRY', 'DEAD')),
    CONSTRAINT {{.OutboxName}}_payload_check CHECK (json_valid(payload)),
    CONSTRAINT {{.OutboxName}}_headers_check CHECK (headers IS NULL OR json_valid(headers)),
    CONSTRAINT {{.OutboxName}}_time_check CHECK (typeof(occurred_at) = 'integer' AND typeof(created_at) = 'integer')
);

-- SQLite has partial indexes: the claim walks only unsent rows, so delivered
-- history costs it nothing (seed 003). The queries repeat the index's
-- "status IN (...)" term verbatim, which is what lets the planner use them.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_unsent_idx
    ON {{.OutboxName}} (id) WHERE status IN ('PENDING', 'RETRY', 'PROCESSING');

-- "Is there an earlier unsent row of this aggregate?" is one index probe.
CREATE INDEX IF NOT EXISTS {{.OutboxName}}_aggregate_unsent_idx
    ON {{.OutboxName}} (aggregate_type, aggregate_id, id) WHERE status IN ('PENDING', 'RETRY', 'PROCESSING');

CREATE INDEX IF NOT EXISTS {{.OutboxName}}_dead_idx
    ON {{.OutboxName}} (created_at) WHERE status = 'DEAD';

CREATE INDEX IF NOT EXISTS {{.OutboxName}}_sent_idx
    ON {{.OutboxName}} (sent_at) WHERE status = 'SENT';
