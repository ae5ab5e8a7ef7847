package inbox

import (
	"context"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/telemetry"
)

// observer is the consumer's metrics and tracing hooks. With neither
// configured, handlerStart and txDone return at once: no clock reads, no
// allocation.
type observer struct {
	name   string
	m      Metrics          // nil: no metrics
	tracer telemetry.Tracer // nil: no tracing
}

func newObserver(c *Consumer) *observer {
	o := &observer{name: c.cfg.Name, m: c.cfg.Metrics, tracer: c.cfg.Tracer}
	if o.m != nil {
		o.m.Attach(c.cfg.Name, c.Stats)
	}
	return o
}

func noEnd(error) {}

// handlerStart opens the handler's span, a child of the publish span whose
// trace context came with the event, and starts its timer; the returned
// function ends both with the handler's result.
func (o *observer) handlerStart(ctx context.Context, ev txbox.Event) (context.Context, func(error)) {
	if o.tracer == nil && o.m == nil {
		return ctx, noEnd
	}
	start := time.Now()
	var span telemetry.Span
	if o.tracer != nil {
		ctx, span = o.tracer.StartProcess(ctx, o.name, telemetry.Event{ID: ev.ID, Type: ev.Type, AggregateType: ev.AggregateType, Headers: ev.Headers})
	}
	return ctx, func(err error) {
		if o.m != nil {
			o.m.Handled(time.Since(start), err)
		}
		if span != nil {
			span.End(err)
		}
	}
}

// txDone records one inbox transaction that began at began.
func (o *observer) txDone(began time.Time) {
	if o.m != nil {
		o.m.Transaction(time.Since(began))
	}
}

// eventAttrs are the attributes every log line about an event carries,
// followed by more.
func eventAttrs(ev txbox.Event, more ...any) []any {
	return append([]any{"event_id", ev.ID, "aggregate_type", ev.AggregateType, "aggregate_id", ev.AggregateID, "event_type", ev.Type}, more...)
}
