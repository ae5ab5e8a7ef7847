// Package otel traces txbox events with OpenTelemetry: the telemetry.Tracer
// hook over the OpenTelemetry API, carrying W3C trace context
// (traceparent, tracestate) in the event headers. It uses only the API: the
// SDK and its exporters are the program's choice.
//
//	tr := otel.NewTracer(tp) // tp: the program's trace.TracerProvider
//	w := outbox.NewWriter(d, outbox.WithTracer(tr))
//	r, err := relay.New(relay.Config{..., Tracer: tr})
//	c, err := inbox.New(s, inbox.Config{..., Tracer: tr}, h)
//
// The writer stores the caller's span context as the traceparent and
// tracestate headers of every event that has no traceparent of its own; the
// relay opens a producer span "publish <topic>" per event whose writer
// sampled its trace, a child of the writer's span and linked to it, and
// sends that span's traceparent on the wire; the consumer wraps each
// handler call in a consumer span "process <event type>" that continues
// the trace.
package otel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/txbox/txbox/telemetry"
)

// The instrumentation scopes of the relay's and the consumer's spans.
const (
	RelayScope = "github.com/txbox/txbox/relay"
	InboxScope = "github.com/txbox/txbox/inbox"
)

// Tracer is telemetry.Tracer over an OpenTelemetry TracerProvider. It is
// safe for concurrent use; one serves the writers, relays and consumers of
// a process.
type Tracer struct {
	relay, inbox trace.Tracer
}

var _ telemetry.Tracer = (*Tracer)(nil)

// NewTracer returns a tracer whose spans tp makes (nil: none are recorded;
// the writer still stores the caller's span context).
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Tracer{relay: tp.Tracer(RelayScope), inbox: tp.Tracer(InboxScope)}
}

// Inject returns h with ctx's span context as traceparent and tracestate.
// When ctx carries no valid span, or h has a traceparent already (the
// producer set it), h is returned as it is: no copy, no allocation. h itself
// is never modified; a new map is returned.
func (*Tracer) Inject(ctx context.Context, h map[string]string) map[string]string {
	return inject(ctx, h)
}

// StartPublish opens one publish span for a message that carries a trace
// context, a child of the writer's span (the traceparent the writer stored
// in the headers) and linked to it, and puts the publish span's
// traceparent in ev.Headers, so the consumer continues the same trace.
func (t *Tracer) StartPublish(ctx context.Context, topic string, ev telemetry.Event) telemetry.Span {
	writer := remote(ev.Headers)
	if !writer.IsSampled() {
		// No trace to continue (a foreign producer, a writer outside any
		// span), or one its writer chose not to record: the event goes
		// out as it is, its traceparent untouched, at no tracing cost.
		// The relay follows the writer's head sampling decision.
		return nil
	}
	_, sp := t.relay.Start(trace.ContextWithRemoteSpanContext(ctx, writer), "publish "+topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(trace.Link{SpanContext: writer}),
		trace.WithAttributes(
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.message.id", ev.ID),
			attribute.String("txbox.event_type", ev.Type),
			attribute.String("txbox.aggregate_type", ev.AggregateType),
		))
	// The headers map is the relay's own (decoded from the row), so the
	// row keeps the writer's traceparent for a later retry.
	set(ev.Headers, sp.SpanContext())
	return span{sp}
}

// StartProcess opens the handler's span, a child of the publish span whose
// traceparent came with the event.
func (t *Tracer) StartProcess(ctx context.Context, consumer string, ev telemetry.Event) (context.Context, telemetry.Span) {
	if r := remote(ev.Headers); r.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, r)
	}
	ctx, sp := t.inbox.Start(ctx, "process "+ev.Type, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.message.id", ev.ID),
		attribute.String("messaging.consumer.group.name", consumer),
		attribute.String("txbox.event_type", ev.Type),
		attribute.String("txbox.aggregate_type", ev.AggregateType),
		attribute.String("txbox.consumer", consumer),
	))
	return ctx, span{sp}
}

// span ends an OpenTelemetry span with an outcome: an error is recorded
// and sets the status.
type span struct{ s trace.Span }

func (s span) End(err error) {
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}
