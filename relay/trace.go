package relay

import (
	"context"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/telemetry"
)

// startSpans opens one publish span per message that carries a trace
// context its writer sampled (Config.Tracer decides, and puts the publish
// span's context in the message's headers, so the consumer continues the
// same trace). The headers map is this batch's own (decoded from the row),
// so the row keeps the writer's traceparent for a later retry. With
// tracing off (no Tracer) it does nothing and returns nil.
func (r *Relay) startSpans(ctx context.Context, msgs []broker.Message) []telemetry.Span {
	if r.tracer == nil {
		return nil
	}
	spans := make([]telemetry.Span, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		e := &m.Event
		spans[i] = r.tracer.StartPublish(ctx, m.Topic, telemetry.Event{ID: e.ID, Type: e.Type, AggregateType: e.AggregateType, Headers: e.Headers})
	}
	return spans
}

// endSpans closes the spans of one round with each message's outcome.
func endSpans(spans []telemetry.Span, errs []error) {
	for i, span := range spans {
		if span == nil {
			continue
		}
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		span.End(err)
	}
}
