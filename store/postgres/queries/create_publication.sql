{{/*
createPublication: the publication CDC relays subscribe to: the outbox
table's inserts, and its updates so a replayed DEAD row is delivered again.
*/ -}}
CREATE PUBLICATION {{.Publication}} FOR TABLE {{.Table}} WITH (publish = 'insert, update')
