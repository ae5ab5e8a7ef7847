-- The hot table holds only rows that still need the relay or an operator:
-- unsent rows and DEAD rows. MarkSent moves a delivered row into
-- {{.SentName}} (or deletes it with DeleteSent), so claims never walk
-- delivered history: MySQL has no partial indexes (seed 003).
--
-- payload and headers are LONGTEXT with a JSON_VALID check rather than JSON:
-- MySQL's JSON type re-serialises documents (key order, spacing), and the
-- producer's bytes must reach the consumer unchanged. Identifiers use
-- utf8mb4_bin: aggregate "A" and aggregate "a" are different aggregates.
-- Timestamps are DATETIME(6) in UTC; defaults use UTC_TIMESTAMP(6), so the
-- session time zone of a foreign producer does not matter.
CREATE TABLE IF NOT EXISTS {{.Outbox}} (
    id                BIGINT       NOT NULL AUTO_INCREMENT,
    event_id          VARCHAR(64)  NOT NULL,
    aggregate_type    VARCHAR(64)  NOT NULL,
    aggregate_id      VARCHAR(128) NOT NULL,
    aggregate_version BIGINT       NOT NULL DEFAULT 0,
    event_type        VARCHAR(128) NOT NULL,
    payload           LONGTEXT     NOT NULL,
    headers           TEXT         NULL,
    status            VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
    retry_count       INT          NOT NULL DEFAULT 0,
    next_retry_at     DATETIME(6)  NULL,
    locked_by         VARCHAR(128) NULL,
    locked_until      DATETIME(6)  NULL,
    occurred_at       DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    created_at        DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    sent_at           DATETIME(6)  NULL,
    last_error        TEXT         NULL,
    -- 1 while the row still needs delivering. DEAD rows stay in this table
    -- until replayed or purged; indexing on this flag keeps even a pile of
    -- them out of the claim's way.
    unsent            TINYINT AS (status IN ('PENDING', 'RETRY', 'PROCESSING')) STORED,
    PRIMARY KEY (id),
    UNIQUE KEY event_id_key (event_id),
    CONSTRAINT {{.OutboxName}}_status_chk CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'RETRY', 'DEAD')),
    CONSTRAINT {{.OutboxName}}_payload_chk CHECK (JSON_VALID(payload)),
    CONSTRAINT {{.OutboxName}}_headers_chk CHECK (headers IS NULL OR JSON_VALID(headers))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The claim's scan: unsent rows in id order.
CREATE INDEX unsent_idx ON {{.Outbox}} (unsent, id);

-- "Which is the first unsent row of this aggregate?" is one index probe
-- (pg-boss#849 is what happens without it); the runs read the same range.
CREATE INDEX aggregate_unsent_idx ON {{.Outbox}} (aggregate_type, aggregate_id, unsent, id);

-- Dead-letter listing, replay and purge.
CREATE INDEX status_idx ON {{.Outbox}} (status, id);

-- Delivered rows. Same columns; id is the outbox id, kept. event_id is not
-- unique here: a producer that re-inserts an already delivered event gets it
-- delivered again (consumers dedupe), rather than a relay stuck on a
-- duplicate key.
CREATE TABLE IF NOT EXISTS {{.Sent}} (
    id                BIGINT       NOT NULL,
    event_id          VARCHAR(64)  NOT NULL,
    aggregate_type    VARCHAR(64)  NOT NULL,
    aggregate_id      VARCHAR(128) NOT NULL,
    aggregate_version BIGINT       NOT NULL DEFAULT 0,
    event_type        VARCHAR(128) NOT NULL,
    payload           LONGTEXT     NOT NULL,
    headers           TEXT         NULL,
    status            VARCHAR(16)  NOT NULL DEFAULT 'SENT',
    retry_count       INT          NOT NULL DEFAULT 0,
    next_retry_at     DATETIME(6)  NULL,
    locked_by         VARCHAR(128) NULL,
    locked_until      DATETIME(6)  NULL,
    occurred_at       DATETIME(6)  NOT NULL,
    created_at        DATETIME(6)  NOT NULL,
    sent_at           DATETIME(6)  NOT NULL,
    last_error        TEXT         NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Cleanup deletes the oldest first, in batches.
CREATE INDEX sent_at_idx ON {{.Sent}} (sent_at);

CREATE INDEX event_id_idx ON {{.Sent}} (event_id);

CREATE INDEX aggregate_idx ON {{.Sent}} (aggregate_type, aggregate_id, id);
