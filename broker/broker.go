// Package broker defines the thin interface every message broker adapter
// implements, and the CloudEvents mapping they share.
//
// Adapters never retry and never sleep: they speak their protocol once and
// report what happened. Retries, backoff, ordering and bookkeeping live once,
// in package relay (publish side) and package inbox (consume side).
package broker

import (
	"context"
	"time"

	"github.com/txbox/txbox"
)

// Message is one event bound for one destination.
type Message struct {
	Event  txbox.Event
	Topic  string // destination rendered from the relay's template
	Source string // CloudEvents "source": the producing service
}

// Publisher sends messages and reports, per message, whether the broker
// confirmed it.
//
// Publish returns a slice with one entry per message: nil means the broker
// confirmed (acked / persisted) that message. It must not return before every
// message is confirmed or failed, and must honour ctx as the deadline for the
// whole call. Implementations may pipeline the messages, but must hand them
// to the broker in slice order.
//
// A failure of the event that retrying cannot fix (an invalid destination
// name, a payload too large) wraps txbox.ErrPermanent. A failure of the way
// out wraps txbox.ErrBrokerUnavailable: the broker unreachable, no
// confirmation in time, or a refusal for a state of the broker rather than
// of the event (a destination missing, full or forbidden), which the same
// event gets past once that state changes. Any other error is retryable
// and spends one of the event's attempts.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) []error
	Close() error
}

// Delivery is one received message. Event decodes it; a decode error wraps
// txbox.ErrPermanent and the consumer parks the raw message instead.
type Delivery interface {
	Event() (txbox.Event, error)
	// Raw is a printable summary of the message for parking undecodable ones.
	Raw() RawMessage
	// Attempt is the broker's delivery count, 1 for the first, 0 if unknown.
	Attempt() int
	// Ack confirms processing; the broker will not deliver it again.
	Ack(ctx context.Context) error
	// Nak asks for redelivery no sooner than delay.
	Nak(ctx context.Context, delay time.Duration) error
}

// AsyncAcker is an optional fast path of a Delivery: AckAsync sends the
// acknowledgement without waiting for the broker's confirmation (NATS). The
// inbox uses it after its commit, where a lost ack only brings a
// redelivery that the inbox row absorbs, so the next event's transaction
// does not wait for a round trip. brokertest checks it on every adapter
// whose deliveries have it.
type AsyncAcker interface {
	AckAsync() error
}

// RawMessage is what a consumer keeps of a message it could not decode.
type RawMessage struct {
	Topic   string
	ID      string // best effort: the broker's message id, if any
	Headers map[string]string
	Body    []byte
}

// AckWaiter is a Subscriber that says how long a delivery may stay
// unsettled before it is handed out again (0: never). The inbox holds an
// Ordered delivery for well under that (inbox.Config.HoldFor): a copy
// handed out again while the first is held would only be held beside it.
type AckWaiter interface {
	AckWait() time.Duration
}

// Subscriber receives deliveries for one durable consumer.
type Subscriber interface {
	// Receive blocks until at least one delivery is there, up to max, or ctx
	// ends (then it returns ctx.Err()).
	Receive(ctx context.Context, max int) ([]Delivery, error)
	Close() error
}
