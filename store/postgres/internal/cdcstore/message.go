package cdcstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// A tableless event's content is its outbox id, a newline, then Message
// as JSON (the encoding is described in store/postgres/emit.go, which
// writes it).

// Message is the JSON half of a tableless event.
type Message struct {
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
	var m Message
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
