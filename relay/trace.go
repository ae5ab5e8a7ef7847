package relay

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/tracing"
)

const tracerName = "github.com/txbox/txbox/relay"

// startSpans opens one publish span per message that carries a trace
// context, a child of the writer's span (the traceparent the writer stored
// in the headers) and linked to it,
// and puts the publish span's traceparent on the message, so the consumer
// continues the same trace. With tracing off (no TracerProvider) it does
// nothing and returns nil.
func (r *Relay) startSpans(ctx context.Context, msgs []broker.Message) []trace.Span {
	if r.tracer == nil {
		return nil
	}
	spans := make([]trace.Span, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		e := &m.Event
		writer := tracing.Remote(e.Headers)
		if !writer.IsSampled() {
			// No trace to continue (a foreign producer, a writer outside any
			// span), or one its writer chose not to record: the event goes
			// out as it is, its traceparent untouched, at no tracing cost.
			// The relay follows the writer's head sampling decision.
			continue
		}
		opts := []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithLinks(trace.Link{SpanContext: writer}),
			trace.WithAttributes(
				attribute.String("messaging.operation.type", "send"),
				attribute.String("messaging.destination.name", m.Topic),
				attribute.String("messaging.message.id", e.ID),
				attribute.String("txbox.event_type", e.Type),
				attribute.String("txbox.aggregate_type", e.AggregateType),
			),
		}
		_, span := r.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, writer), "publish "+m.Topic, opts...)
		// The headers map is this batch's own (decoded from the row), so
		// the row keeps the writer's traceparent for a later retry.
		tracing.Set(e.Headers, span.SpanContext())
		spans[i] = span
	}
	return spans
}

// endSpans closes the spans of one round with each message's outcome.
func endSpans(spans []trace.Span, errs []error) {
	for i, span := range spans {
		if span == nil {
			continue
		}
		if i < len(errs) && errs[i] != nil {
			span.RecordError(errs[i])
			span.SetStatus(codes.Error, errs[i].Error())
		}
		span.End()
	}
}
