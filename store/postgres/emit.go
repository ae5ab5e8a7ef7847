package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
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

// cdcMessage is the JSON half of a tableless event.
type cdcMessage struct {
	V                int               `json:"v"`
	EventID          string            `json:"event_id"`
	AggregateType    string            `json:"aggregate_type"`
	AggregateID      string            `json:"aggregate_id"`
	AggregateVersion int64             `json:"aggregate_version"`
	EventType        string            `json:"event_type"`
	OccurredAt       time.Time         `json:"occurred_at"`
	Headers          map[string]string `json:"headers,omitempty"`
	Payload          json.RawMessage   `json:"payload"`
}

// MessagePrefix is the logical decoding message prefix of tableless events
// for the outbox table of t.
func MessagePrefix(t store.Tables) string {
	t = t.WithDefaults()
	return "txbox:" + t.Qualified(t.Outbox)
}

// EmitEvents implements store.MessageEmitter: one statement emits every
// event, each with its own id from the outbox table's sequence.
func (d Dialect) EmitEvents(ctx context.Context, tx store.Tx, events []txbox.Event) error {
	t := d.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	bodies := make([]string, len(events))
	for i, e := range events {
		b, err := json.Marshal(cdcMessage{V: 1, EventID: e.ID, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
			AggregateVersion: e.AggregateVersion, EventType: e.Type, OccurredAt: e.OccurredAt.UTC(), Headers: e.Headers, Payload: json.RawMessage(e.Payload)})
		if err != nil {
			return fmt.Errorf("outbox: event %d: %w: %v", i, txbox.ErrInvalidEvent, err)
		}
		bodies[i] = string(b)
	}
	// unnest keeps the array's order, so the messages are in the log in the
	// order of events, like the rows of one INSERT.
	_, err := tx.Exec(ctx, dialectSQL.emitEvents, MessagePrefix(t), t.Qualified(t.Outbox), bodies)
	if err != nil {
		return fmt.Errorf("postgres: emit events: %w", err)
	}
	return nil
}

// DecodeMessage turns the content of a tableless event back into the record
// a row would have been; createdAt is the commit time. An error means the
// message can never be delivered (it wraps txbox.ErrPermanent); id is set
// whenever the content starts with one, so the caller can still record it.
func DecodeMessage(content []byte, createdAt time.Time) (store.Record, error) {
	rec := store.Record{Status: txbox.StatusPending, CreatedAt: createdAt}
	head, body, ok := bytes.Cut(content, []byte("\n"))
	if !ok {
		return rec, txbox.Permanent(fmt.Errorf("%w: tableless event without an id line", txbox.ErrInvalidEvent))
	}
	id, err := strconv.ParseInt(string(head), 10, 64)
	if err != nil {
		return rec, txbox.Permanent(fmt.Errorf("%w: tableless event id %q: %v", txbox.ErrInvalidEvent, head, err))
	}
	rec.ID = id
	var m cdcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return rec, txbox.Permanent(fmt.Errorf("%w: tableless event %d: %v", txbox.ErrInvalidEvent, id, err))
	}
	if m.V != 1 {
		return rec, txbox.Permanent(fmt.Errorf("%w: tableless event %d: encoding version %d, want 1", txbox.ErrInvalidEvent, id, m.V))
	}
	rec.EventID, rec.AggregateType, rec.AggregateID = m.EventID, m.AggregateType, m.AggregateID
	rec.AggregateVersion, rec.EventType, rec.OccurredAt = m.AggregateVersion, m.EventType, m.OccurredAt
	rec.Payload = []byte(m.Payload)
	if len(m.Headers) > 0 {
		rec.Headers, _ = json.Marshal(m.Headers)
	}
	return rec, nil
}
