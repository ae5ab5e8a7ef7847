// Package telemetry is how the relay, the inbox and the outbox writer report
// metrics and traces: small hook interfaces, plain method calls with plain
// values. The core packages compile no metrics or tracing library; the
// implementations live in packages of their own, which a program wires in:
// telemetry/prom (Prometheus metrics, the names in METRICS.md) and
// telemetry/otel (OpenTelemetry tracing, W3C trace context in the event
// headers). Another backend (statsd, a vendor's tracer) implements the same
// interfaces.
//
// Every hook is optional: a nil RelayMetrics, InboxMetrics or Tracer means
// no metrics or tracing work at all. This package imports nothing but the
// standard library.
package telemetry

import (
	"context"
	"time"
)

// RelayMetrics receives a relay's measurements (relay.Config.Metrics). The
// relay calls its methods from several goroutines at once, some of them on
// the delivery path: they must be safe for concurrent use and must not
// block. Embed NopRelayMetrics to implement only some of them.
type RelayMetrics interface {
	// Attach is called once, by relay.New, before any other method. state
	// returns the relay's running totals and its last sampled state; it may
	// be called from any goroutine at any time for the life of the relay.
	// A pull backend (Prometheus) reads it when scraped; a push backend can
	// read it in BacklogSampled.
	Attach(state func() RelayState)
	// Claimed: one claim statement took took and returned rows rows, or
	// failed with err (a database error; rows is then 0).
	Claimed(took time.Duration, rows int, err error)
	// PublishRound: one publish round (a pipelined publish until the broker
	// confirmed or failed every message) took took.
	PublishRound(took time.Duration)
	// Confirmed: the broker confirmed one message, delay after its row was
	// written (the row's created_at, the writer's transaction). Called
	// once per confirmed message.
	Confirmed(delay time.Duration)
	// BatchStarted and BatchDone bracket one claimed batch being published
	// and marked; markFailed: its marks failed, so its rows are delivered
	// again.
	BatchStarted()
	BatchDone(markFailed bool)
	// Woke says what ended a wait after a claim that did not fill a batch.
	Woke(source WakeSource)
	// BacklogSampled: the relay sampled its backlog from the database (every
	// relay.Config.MetricsInterval, and for each readiness check); err is
	// the failure, nil when state now holds the new sample.
	BacklogSampled(err error)
}

// WakeSource is what ended a relay's wait between claims.
type WakeSource string

const (
	WokeByListen WakeSource = "listen" // a push wake-up (relay.Config.Wakeup)
	WokeByPoll   WakeSource = "poll"   // the poll interval ran out
	WokeByBatch  WakeSource = "batch"  // one of the relay's own batches ended, freeing its aggregates
)

// RelayState is a relay's running totals, since it started, and its last
// sampled state.
type RelayState struct {
	// Publish outcomes: Delivered (the broker confirmed), Retried (row to
	// RETRY, an attempt spent), Deferred (row to RETRY for an outage of the
	// way out, no attempt spent), Dead (row to DEAD).
	Delivered, Retried, Deferred, Dead int64
	// Claimed rows; Released: claimed rows handed back unpublished;
	// LeaseLost: marks refused because another relay took the rows over.
	Claimed, Released, LeaseLost int64

	// Backlog is the last successful sample from the database, taken at
	// SampledAt (zero: none yet).
	Backlog   Backlog
	SampledAt time.Time
	// LastPublish is when the broker last confirmed a message (zero: not
	// yet).
	LastPublish time.Time
	// BrokerUp: the broker takes publishes (false until the first publish
	// or ping succeeded, and during an outage). DestinationsDown counts the
	// destinations refusing publishes for an outage of their own while the
	// broker takes others.
	BrokerUp         bool
	DestinationsDown int
	// DatabaseUp: the relay's claims and backlog samples succeed (false
	// until the first success and from a failure to the next success).
	DatabaseUp bool
	// Ready is the last readiness verdict (relay.Relay.Ready).
	Ready bool
}

// Backlog is the outbox's rows still to deliver, by status, and its DEAD
// rows, as sampled from the database.
type Backlog struct {
	Pending, Retry, Processing, Dead int64
	// OldestAge is the age of the oldest PENDING, RETRY or PROCESSING row
	// (database clock); 0 when there is none.
	OldestAge time.Duration
}

// InboxMetrics receives a consumer's measurements (inbox.Config.Metrics).
// Its methods are called from the consumer's goroutines, on the delivery
// path: they must be safe for concurrent use and must not block. Embed
// NopInboxMetrics to implement only some of them.
type InboxMetrics interface {
	// Attach is called once, by inbox.New, before any other method, with
	// the consumer's name (inbox.Config.Name) and its running totals; state
	// may be called from any goroutine at any time for the life of the
	// consumer.
	Attach(consumer string, state func() InboxState)
	// Handled: one handler call (one attempt at an event) took took and
	// returned err.
	Handled(took time.Duration, err error)
	// Transaction: one inbox transaction, begin to commit or rollback, took
	// took (inbox.Config.TxBatch above 1: one per shared transaction).
	Transaction(took time.Duration)
}

// InboxState is a consumer's running totals since it started, and whether
// its database is reachable.
type InboxState struct {
	Processed   int64 // handler ran and committed
	Duplicates  int64 // deliveries of events already processed: acknowledged and skipped
	Failed      int64 // failed handler attempts (each attempt counts)
	Parked      int64 // events parked (DEAD) after their last attempt, or refused by the store
	Undecodable int64 // messages that were not txbox events, parked raw
	Stale       int64 // events skipped by the version guard as stale
	Held        int64 // Ordered: events held back to wait for their predecessor
	Replayed    int64 // parked events applied again on an operator's replay request
	OutageWaits int64 // deliveries sent back for an outage, spending no attempt
	// DatabaseUp is false from the first failure that met an outage (the
	// consumer's database, or one its handler needs, unavailable) until a
	// delivery sent back for it gets through.
	DatabaseUp bool
}

// Tracer traces events from the writer through the relay to the consumer's
// handler, carrying the trace context in the event headers
// (outbox.WithTracer, relay.Config.Tracer, inbox.Config.Tracer). Its methods
// are called concurrently and must be safe for it.
type Tracer interface {
	// Inject returns headers with the trace context of the span ctx
	// carries, for the write API (outbox.Writer.Add). It returns headers
	// itself when ctx carries no span or headers already carry a trace
	// context (the producer set one); it never modifies headers, it
	// returns a new map.
	Inject(ctx context.Context, headers map[string]string) map[string]string
	// StartPublish opens the relay's span for publishing ev to topic,
	// continuing the trace its headers carry, and writes the span's
	// context into ev.Headers (the relay's own copy of the event, so the
	// row keeps the writer's). It returns nil, and leaves the headers
	// alone, when there is nothing to trace (no trace context, or one its
	// writer chose not to record).
	StartPublish(ctx context.Context, topic string, ev Event) Span
	// StartProcess opens the consumer's span around one handler call of
	// consumer on ev, continuing the trace its headers carry; the handler
	// runs with the returned context. The span may be nil.
	StartProcess(ctx context.Context, consumer string, ev Event) (context.Context, Span)
}

// Event is what a span is told of the event it covers.
type Event struct {
	ID            string
	Type          string
	AggregateType string
	Headers       map[string]string
}

// Span is one open span.
type Span interface {
	// End closes the span with its outcome: err is the publish's or the
	// handler's failure, nil on success.
	End(err error)
}

// NopRelayMetrics implements RelayMetrics doing nothing: embed it in an
// implementation that needs only some of the methods.
type NopRelayMetrics struct{}

func (NopRelayMetrics) Attach(func() RelayState)          {}
func (NopRelayMetrics) Claimed(time.Duration, int, error) {}
func (NopRelayMetrics) PublishRound(time.Duration)        {}
func (NopRelayMetrics) Confirmed(time.Duration)           {}
func (NopRelayMetrics) BatchStarted()                     {}
func (NopRelayMetrics) BatchDone(bool)                    {}
func (NopRelayMetrics) Woke(WakeSource)                   {}
func (NopRelayMetrics) BacklogSampled(error)              {}

// NopInboxMetrics implements InboxMetrics doing nothing: embed it in an
// implementation that needs only some of the methods.
type NopInboxMetrics struct{}

func (NopInboxMetrics) Attach(string, func() InboxState) {}
func (NopInboxMetrics) Handled(time.Duration, error)     {}
func (NopInboxMetrics) Transaction(time.Duration)        {}

var (
	_ RelayMetrics = NopRelayMetrics{}
	_ InboxMetrics = NopInboxMetrics{}
)
