-- An outbox id is not unique over time: TRUNCATE ... RESTART IDENTITY (a
-- common clean-up) or a producer writing explicit ids hands out an id that
-- the archive already holds. With the archive keyed on id, every marking
-- transaction that moved such a row failed, and the relay republished its
-- batches for ever. The archive is a log of what was sent: it keeps every
-- row, and id is only indexed. The primary key is dropped whatever its name
-- (it was created unnamed).
DO $$
DECLARE
    pk text;
BEGIN
    SELECT conname INTO pk FROM pg_constraint
        WHERE conrelid = '{{.Sent}}'::regclass AND contype = 'p';
    IF pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE {{.Sent}} DROP CONSTRAINT %I', pk);
    END IF;
END $$;

CREATE INDEX IF NOT EXISTS {{.SentName}}_id_idx ON {{.Sent}} (id);
