package otel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	txotel "github.com/txbox/txbox/telemetry/otel"
)

func TestOneTraceNATS(t *testing.T)     { oneTrace(t, brokerenv.NATS{}.Setup(t)) }
func TestOneTraceRabbitMQ(t *testing.T) { oneTrace(t, brokerenv.RabbitMQ{}.Setup(t)) }

// oneTrace: a writer inside a span, a relay and a consumer with tracing on
// make one trace over a real broker: the relay's publish span is a child of
// (and linked to) the writer's span, the consumer's handler span a child of
// the publish span, with the event's id, type and consumer as attributes; a
// failed handler attempt is recorded on its span.
func oneTrace(t *testing.T, dest *scenario.Destination) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := txotel.NewTracer(tp)
	s := storeenv.OpenPostgres(t, postgres.Options{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	wctx, writerSpan := tp.Tracer("app").Start(ctx, "place order")
	ev := txbox.MustEvent("Order", "o1", "Created", map[string]int{"n": 1})
	tx, err := s.Pool().Begin(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgxtx.Add(wctx, tx, outbox.NewWriter(s.Dialect(), outbox.WithTracer(tr)), ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(wctx); err != nil {
		t.Fatal(err)
	}
	writerSpan.End()

	r, err := relay.New(relay.Config{Store: s, Publisher: dest.Publisher(t), Topic: broker.Topic(dest.Topic), Tracer: tr, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	t.Cleanup(func() { stop(); <-done; <-done })
	go func() { _ = r.Run(rctx); done <- struct{}{} }()

	var calls atomic.Int32
	handled := make(chan struct{})
	c, err := inbox.New(s, inbox.Config{Name: "billing", Subscriber: dest.Subscriber(t, "billing"),
		Tracer: tr, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond},
		func(ctx context.Context, _ pgx.Tx, e txbox.Event) error {
			if calls.Add(1) == 1 {
				return errors.New("first attempt fails")
			}
			if !trace.SpanContextFromContext(ctx).IsValid() {
				t.Error("the handler's context carries no span")
			}
			close(handled)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(rctx); done <- struct{}{} }()
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the event was not handled")
	}

	var writer, publish sdktrace.ReadOnlySpan
	var process []tracetest.SpanStub
	deadline := time.Now().Add(5 * time.Second)
	for {
		process = process[:0]
		for _, sp := range exp.GetSpans() {
			switch {
			case sp.Name == "place order":
				writer = sp.Snapshot()
			case sp.SpanKind == trace.SpanKindProducer:
				publish = sp.Snapshot()
			case sp.SpanKind == trace.SpanKindConsumer:
				process = append(process, sp)
			}
		}
		if writer != nil && publish != nil && len(process) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if writer == nil || publish == nil || len(process) != 2 {
		t.Fatalf("spans: writer %v publish %v process %d, want 1, 1, 2", writer != nil, publish != nil, len(process))
	}
	trID := writer.SpanContext().TraceID()
	if publish.SpanContext().TraceID() != trID || publish.Parent().SpanID() != writer.SpanContext().SpanID() {
		t.Fatalf("publish span is not the writer's child: parent %v, writer %v", publish.Parent(), writer.SpanContext())
	}
	if l := publish.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != writer.SpanContext().SpanID() {
		t.Fatalf("publish span links %v, want the writer's span", l)
	}
	for i, p := range process {
		if p.SpanContext.TraceID() != trID || p.Parent.SpanID() != publish.SpanContext().SpanID() {
			t.Fatalf("process span %d is not the publish span's child: parent %v", i, p.Parent)
		}
		attrs := map[string]string{}
		for _, a := range p.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs["messaging.message.id"] != ev.ID || attrs["txbox.event_type"] != "Created" || attrs["txbox.consumer"] != "billing" {
			t.Fatalf("process span attributes %v", attrs)
		}
	}
	if process[0].Status.Code != codes.Error || len(process[0].Events) == 0 || process[1].Status.Code == codes.Error {
		t.Fatalf("statuses: first %v (%d events), second %v; want the failed attempt recorded", process[0].Status, len(process[0].Events), process[1].Status)
	}
}
