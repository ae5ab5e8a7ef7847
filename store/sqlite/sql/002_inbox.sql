-- The inbox: one row per (event, consumer name), the key that makes a
-- redelivered event change nothing twice. Same columns and statuses as the
-- PostgreSQL inbox; timestamps are INTEGER unix microseconds, UTC, as in 001
-- (the store writes them from Go; the defaults have millisecond resolution).
-- TEXT compares with the BINARY collation: ids are exact, byte for byte.
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    event_id          TEXT    NOT NULL,
    consumer_name     TEXT    NOT NULL,
    event_type        TEXT    NOT NULL,
    status            TEXT    NOT NULL DEFAULT 'PROCESSING',
    received_at       INTEGER NOT NULL DEFAULT ({{.NowMicros}}),
    processed_at      INTEGER NULL,
    retry_count       INTEGER NOT NULL DEFAULT 0,
    error_message     TEXT    NULL,
    -- The event itself is kept while it is not processed, so a parked event
    -- can be replayed after its broker message was acknowledged.
    aggregate_type    TEXT    NULL,
    aggregate_id      TEXT    NULL,
    aggregate_version INTEGER NOT NULL DEFAULT 0,
    occurred_at       INTEGER NULL,
    headers           TEXT    NULL,
    payload           TEXT    NULL,
    PRIMARY KEY (event_id, consumer_name),
    CONSTRAINT {{.InboxName}}_status_check CHECK (status IN ('PROCESSING', 'PROCESSED', 'RETRY', 'DEAD', 'REPLAY', 'SKIPPED')),
    CONSTRAINT {{.InboxName}}_time_check CHECK (typeof(received_at) = 'integer')
);

-- Operators' views, the consumer's replay pick-up and the counts.
CREATE INDEX IF NOT EXISTS {{.InboxName}}_monitor_idx
    ON {{.InboxName}} (consumer_name, status, received_at);

-- Cleanup walks only finished rows, oldest first; the query repeats the
-- WHERE term verbatim so the planner uses this partial index.
CREATE INDEX IF NOT EXISTS {{.InboxName}}_done_idx
    ON {{.InboxName}} (received_at) WHERE status IN ('PROCESSED', 'SKIPPED');

-- The aggregate version guard: the last applied version per consumer and
-- aggregate, written in the handler's transaction.
CREATE TABLE IF NOT EXISTS {{.Inbox}}_versions (
    consumer_name  TEXT    NOT NULL,
    aggregate_type TEXT    NOT NULL,
    aggregate_id   TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL DEFAULT ({{.NowMicros}}),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
);
