CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    event_id          VARCHAR(64)  NOT NULL,
    consumer_name     VARCHAR(128) NOT NULL,
    event_type        VARCHAR(128) NOT NULL,
    status            VARCHAR(16)  NOT NULL DEFAULT 'PROCESSING',
    received_at       TIMESTAMPTZ  NOT NULL DEFAULT now(),
    processed_at      TIMESTAMPTZ  NULL,
    retry_count       INT          NOT NULL DEFAULT 0,
    error_message     TEXT         NULL,
    -- The event itself is kept while it is not processed, so a parked event
    -- can be replayed after its broker message was acknowledged.
    aggregate_type    VARCHAR(64)  NULL,
    aggregate_id      VARCHAR(128) NULL,
    aggregate_version BIGINT       NOT NULL DEFAULT 0,
    occurred_at       TIMESTAMPTZ  NULL,
    headers           TEXT         NULL,
    payload           TEXT         NULL,
    PRIMARY KEY (event_id, consumer_name),
    CONSTRAINT {{.InboxName}}_status_check CHECK (status IN ('PROCESSING', 'PROCESSED', 'RETRY', 'DEAD', 'REPLAY', 'SKIPPED'))
);

CREATE INDEX IF NOT EXISTS {{.InboxName}}_monitor_idx ON {{.Inbox}} (consumer_name, status, received_at);

-- The aggregate version guard (seed 000 section 10): the last applied
-- version per consumer and aggregate, written in the handler's transaction.
CREATE TABLE IF NOT EXISTS {{.Inbox}}_versions (
    consumer_name  VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NOT NULL,
    version        BIGINT       NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
);
