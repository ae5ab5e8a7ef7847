package txbox

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event is the envelope that travels from the outbox to every consumer.
//
// The ID is fixed when the event is written and never regenerated: replays
// and relay restarts carry the same ID, which is what lets a consumer's inbox
// recognise a duplicate.
type Event struct {
	ID               string            // UUIDv7 by default; unique in the outbox
	Type             string            // e.g. "OrderCreated"
	AggregateType    string            // e.g. "Order"
	AggregateID      string            // routing / partition key; order holds per aggregate
	AggregateVersion int64             // 0 means "not versioned"
	OccurredAt       time.Time         // when the business change happened
	Headers          map[string]string // free-form, e.g. "traceparent"
	Payload          json.RawMessage   // JSON document
}

// NewEvent builds an event with a fresh UUIDv7 and the current time. payload
// is used as is when it is a json.RawMessage or []byte holding valid JSON, and
// marshalled otherwise.
func NewEvent(aggregateType, aggregateID, eventType string, payload any) (Event, error) {
	raw, err := MarshalPayload(payload)
	if err != nil {
		return Event{}, err
	}
	e := Event{
		ID:            NewID(),
		Type:          eventType,
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		OccurredAt:    time.Now().UTC(),
		Payload:       raw,
	}
	// MarshalPayload has already checked the payload (raw JSON is validated,
	// json.Marshal's output is JSON by construction): only the envelope
	// fields are left to check, so the payload is scanned once here, not
	// twice.
	return e, e.validateFields()
}

// MustEvent is NewEvent for tests and examples; it panics on error.
func MustEvent(aggregateType, aggregateID, eventType string, payload any) Event {
	e, err := NewEvent(aggregateType, aggregateID, eventType, payload)
	if err != nil {
		panic(err)
	}
	return e
}

// MarshalPayload turns a payload into JSON bytes. Raw JSON is validated, not
// re-encoded, so the producer's bytes reach the consumer unchanged.
func MarshalPayload(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if !json.Valid(p) {
			return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalidEvent)
		}
		return p, nil
	case []byte:
		if !json.Valid(p) {
			return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalidEvent)
		}
		return json.RawMessage(p), nil
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("%w: marshal payload: %v", ErrInvalidEvent, err)
		}
		return b, nil
	}
}

// Validate reports the first missing or malformed field.
func (e Event) Validate() error {
	if err := e.validateFields(); err != nil {
		return err
	}
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalidEvent)
	}
	return nil
}

// validateFields is Validate without the payload.
func (e *Event) validateFields() error {
	for _, f := range [...]struct {
		name, v string
		max     int
	}{{"id", e.ID, 64}, {"event type", e.Type, 128}, {"aggregate type", e.AggregateType, 64}, {"aggregate id", e.AggregateID, 128}} {
		if f.v == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalidEvent, f.name)
		}
		if len(f.v) > f.max {
			return fmt.Errorf("%w: %s longer than %d characters", ErrInvalidEvent, f.name, f.max)
		}
	}
	if e.AggregateVersion < 0 {
		return fmt.Errorf("%w: negative aggregate version", ErrInvalidEvent)
	}
	return nil
}

// Status is a row's place in the outbox or inbox status machine.
type Status string

// Outbox: PENDING -> PROCESSING -> SENT; failures go to RETRY and, after the
// last attempt, to DEAD. Inbox: PROCESSING -> PROCESSED, or RETRY -> DEAD.
const (
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusSent       Status = "SENT"
	StatusRetry      Status = "RETRY"
	StatusDead       Status = "DEAD"
	StatusProcessed  Status = "PROCESSED"
	// StatusReplay: an operator asked for a parked inbox event to run again.
	StatusReplay Status = "REPLAY"
	// StatusSkipped: the inbox's version guard dropped a stale event.
	StatusSkipped Status = "SKIPPED"
)
