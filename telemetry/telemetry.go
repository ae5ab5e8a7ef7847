// Package telemetry is how the relay, the inbox and the outbox writer report
// traces: a small hook interface, plain method calls with plain values.
// Their metrics hooks are relay.Metrics and inbox.Metrics, beside the Stats
// they read. The core packages compile no metrics or tracing library; the
// implementations live in packages of their own, which a program wires in:
// telemetry/prom (Prometheus metrics, the names in METRICS.md) and
// telemetry/otel (OpenTelemetry tracing, W3C trace context in the event
// headers). Another backend (statsd, a vendor's tracer) implements the same
// interfaces.
//
// Every hook is optional: a nil Tracer (or Metrics) means no tracing (or
// metrics) work at all. This package imports nothing but the standard
// library.
package telemetry

import (
	"context"
)

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
