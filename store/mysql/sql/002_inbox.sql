-- The inbox: one row per (event, consumer name), the key that makes a
-- redelivered event change nothing twice. Same columns and statuses as the
-- PostgreSQL inbox. As in 001: identifiers are utf8mb4_bin, timestamps
-- DATETIME(6) in UTC with UTC_TIMESTAMP(6) defaults (the store sets them from
-- the database clock too). headers and payload are LONGTEXT, like the
-- outbox's payload, without a JSON check: the inbox must be able to keep
-- whatever arrived, or a parked event could not be recorded at all.
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    event_id          VARCHAR(64)  NOT NULL,
    consumer_name     VARCHAR(128) NOT NULL,
    event_type        VARCHAR(128) NOT NULL,
    status            VARCHAR(16)  NOT NULL DEFAULT 'PROCESSING',
    received_at       DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    processed_at      DATETIME(6)  NULL,
    retry_count       INT          NOT NULL DEFAULT 0,
    error_message     TEXT         NULL,
    -- The event itself is kept while it is not processed, so a parked event
    -- can be replayed after its broker message was acknowledged.
    aggregate_type    VARCHAR(64)  NULL,
    aggregate_id      VARCHAR(128) NULL,
    aggregate_version BIGINT       NOT NULL DEFAULT 0,
    occurred_at       DATETIME(6)  NULL,
    headers           LONGTEXT     NULL,
    payload           LONGTEXT     NULL,
    PRIMARY KEY (event_id, consumer_name),
    CONSTRAINT {{.InboxName}}_status_chk CHECK (status IN ('PROCESSING', 'PROCESSED', 'RETRY', 'DEAD', 'REPLAY', 'SKIPPED'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Operators' views, the consumer's replay pick-up and the counts.
CREATE INDEX monitor_idx ON {{.Inbox}} (consumer_name, status, received_at);

-- Cleanup: finished rows of one status, oldest first, in index order
-- (MySQL has no partial indexes; the status prefix does the job).
CREATE INDEX cleanup_idx ON {{.Inbox}} (status, received_at);

-- The aggregate version guard: the last applied version per consumer and
-- aggregate, written in the handler's transaction.
CREATE TABLE IF NOT EXISTS {{.Inbox}}_versions (
    consumer_name  VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL,
    version        BIGINT       NOT NULL,
    updated_at     DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
