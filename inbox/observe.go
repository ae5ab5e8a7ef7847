package inbox

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/tracing"
)

const tracerName = "github.com/txbox/txbox/inbox"

// observer is the consumer's metrics and tracing. With neither configured,
// handlerStart and txDone return at once: no clock reads, no allocation.
type observer struct {
	name        string
	handler, tx prometheus.Histogram
	tracer      trace.Tracer
}

var secondsBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s

func newObserver(c *Consumer) *observer {
	o := &observer{name: c.cfg.Name}
	if c.cfg.TracerProvider != nil {
		o.tracer = c.cfg.TracerProvider.Tracer(tracerName)
	}
	reg := c.cfg.Metrics
	if reg == nil {
		return o
	}
	labels := prometheus.Labels{"consumer": c.cfg.Name}
	o.handler = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txbox_inbox_handler_seconds", Help: "Duration of the handler, per event.", ConstLabels: labels, Buckets: secondsBuckets})
	o.tx = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txbox_inbox_transaction_seconds", Help: "Duration of one inbox transaction, begin to commit or rollback (TxBatch > 1: one per shared transaction).", ConstLabels: labels, Buckets: secondsBuckets})
	ctr := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return float64(v.Load()) })
	}
	k := &c.ctrs
	for _, col := range []prometheus.Collector{
		o.handler, o.tx,
		ctr("txbox_inbox_processed_total", "Events whose handler ran and committed.", &k.Processed),
		ctr("txbox_inbox_duplicates_total", "Deliveries of events already processed: acknowledged and skipped.", &k.Duplicates),
		ctr("txbox_inbox_failed_total", "Failed handler attempts (each attempt counts).", &k.Failed),
		ctr("txbox_inbox_parked_total", "Events parked (DEAD) after their last attempt, or refused by the store.", &k.Parked),
		ctr("txbox_inbox_undecodable_total", "Messages that were not txbox events, parked raw.", &k.Undecodable),
		ctr("txbox_inbox_skipped_total", "Events skipped by the version guard as stale.", &k.Stale),
		ctr("txbox_inbox_held_total", "Ordered: events held back to wait for their predecessor.", &k.Gaps),
		ctr("txbox_inbox_replayed_total", "Parked events applied again on an operator's replay request.", &k.Replayed),
		ctr("txbox_inbox_outage_waits_total", "Deliveries sent back for an outage (a database unavailable), spending no attempt.", &k.OutageWaits),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "txbox_inbox_database_up", Help: "0 from the first failure that met an outage (the consumer's database, or one its handler needs, unavailable) until a delivery sent back for it gets through; else 1.", ConstLabels: labels},
			func() float64 {
				if c.out.up.Load() {
					return 1
				}
				return 0
			}),
	} {
		reg.MustRegister(col)
	}
	return o
}

func noEnd(error) {}

// handlerStart opens the handler's span, a child of the publish span whose
// traceparent came with the event, and starts its timer; the returned
// function ends both with the handler's result.
func (o *observer) handlerStart(ctx context.Context, ev txbox.Event) (context.Context, func(error)) {
	if o.tracer == nil && o.handler == nil {
		return ctx, noEnd
	}
	start := time.Now()
	var span trace.Span
	if o.tracer != nil {
		if remote := tracing.Remote(ev.Headers); remote.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
		}
		ctx, span = o.tracer.Start(ctx, "process "+ev.Type, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.message.id", ev.ID),
			attribute.String("messaging.consumer.group.name", o.name),
			attribute.String("txbox.event_type", ev.Type),
			attribute.String("txbox.aggregate_type", ev.AggregateType),
			attribute.String("txbox.consumer", o.name),
		))
	}
	return ctx, func(err error) {
		if o.handler != nil {
			o.handler.Observe(time.Since(start).Seconds())
		}
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// txDone records one inbox transaction that began at began.
func (o *observer) txDone(began time.Time) {
	if o.tx != nil {
		o.tx.Observe(time.Since(began).Seconds())
	}
}

// eventAttrs are the attributes every log line about an event carries,
// followed by more.
func eventAttrs(ev txbox.Event, more ...any) []any {
	return append([]any{"event_id", ev.ID, "aggregate_type", ev.AggregateType, "aggregate_id", ev.AggregateID, "event_type", ev.Type}, more...)
}
