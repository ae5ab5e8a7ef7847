-- An outbox id is not unique over time: TRUNCATE resets AUTO_INCREMENT, and
-- a producer may write explicit ids, so a delivered row's id can already be
-- in the archive. Keyed on id alone, every marking transaction that moved
-- such a row failed and the relay republished its batches for ever. The
-- archive is keyed on (id, event_id): InnoDB needs a primary key, and the
-- pair is unique unless the same event is re-inserted with the same id.
-- Online: the table stays readable and writable while the key is rebuilt.
ALTER TABLE {{.Sent}} DROP PRIMARY KEY, ADD PRIMARY KEY (id, event_id), ALGORITHM=INPLACE, LOCK=NONE;
