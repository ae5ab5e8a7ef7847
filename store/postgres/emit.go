package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// Tableless events (outbox.WithCDCMessages) are logical decoding messages,
// written with pg_logical_emit_message(transactional => true) inside the
// caller's transaction: they reach a CDC relay at commit, in commit order
// with the rows, and vanish with a rollback; nothing is left in a table.
//
// The message's prefix is "txbox:" and the qualified outbox table, so
// several outboxes in one database stay apart. Its content is the outbox id
// (a number drawn from the outbox table's own id sequence, so ids never
// collide with rows' and a dead message can be stored as a row), a newline,
// then one JSON object:
//
//	{"v":1,"event_id":"…","aggregate_type":"…","aggregate_id":"…",
//	 "aggregate_version":0,"event_type":"…","occurred_at":"RFC 3339",
//	 "headers":{"k":"v"},"payload":<the payload, JSON as written>}
//
// The payload is JSON already (the outbox's contract), so it is embedded as
// it is rather than base64-encoded.

// EmitEvents implements store.MessageEmitter: one statement emits every
// event, each with its own id from the outbox table's sequence.
func (d Dialect) EmitEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	bodies := make([]string, len(events))
	for i, e := range events {
		b, err := json.Marshal(cdcstore.Message{V: 1, EventID: e.ID, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
			AggregateVersion: e.AggregateVersion, EventType: e.Type, OccurredAt: e.OccurredAt.UTC(), Headers: e.Headers, Payload: json.RawMessage(e.Payload)})
		if err != nil {
			return fmt.Errorf("outbox: event %d: %w: %v", i, txbox.ErrInvalidEvent, err)
		}
		bodies[i] = string(b)
	}
	// unnest keeps the array's order, so the messages are in the log in the
	// order of events, like the rows of one INSERT.
	_, err := tx.Exec(ctx, dialectSQL.emitEvents, cdcstore.MessagePrefix(t), t.Qualified(t.Outbox), bodies)
	if err != nil {
		return fmt.Errorf("postgres: emit events: %w", err)
	}
	return nil
}
