package relay_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/otel"
)

// The relay makes a publish span only for an event whose writer sampled its
// trace, and sends that span's traceparent; an unsampled traceparent goes
// out untouched, and an event without one gets none.
func TestPublishSpansFollowTheWriter(t *testing.T) {
	s := openPG(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	sampled, writerSpan := tp.Tracer("app").Start(context.Background(), "write")
	writerSpan.End()
	unsampledSC := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{7}, SpanID: [8]byte{7}})
	unsampled := trace.ContextWithSpanContext(context.Background(), unsampledSC)

	evs := []txbox.Event{txbox.MustEvent("A", "1", "E", nil), txbox.MustEvent("A", "2", "E", nil), txbox.MustEvent("A", "3", "E", nil)}
	writeCtx(sampled, t, s, evs[0])
	writeCtx(unsampled, t, s, evs[1])
	writeCtx(context.Background(), t, s, evs[2])
	b := membroker.New(membroker.Options{})
	run(t, relay.Config{Store: s, Publisher: b, Tracer: otel.NewTracer(tp)})
	testenv.WaitFor(t, time.Minute, "3 messages", func() bool { return len(b.Messages()) == 3 })
	// A message is in the broker before its publish returns, and the span
	// ends only then; the rows are marked after that, so once all three are
	// sent every publish span has ended.
	waitSent(t, s, 3, 10*time.Second, "3 rows marked sent")

	var publish []tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind == trace.SpanKindProducer {
			publish = append(publish, sp)
		}
	}
	if len(publish) != 1 || publish[0].Parent.SpanID() != writerSpan.SpanContext().SpanID() {
		t.Fatalf("publish spans %d, want 1 child of the sampled writer", len(publish))
	}
	byID := map[string]map[string]string{}
	for _, m := range b.Messages() {
		byID[m.Event.ID] = m.Event.Headers
	}
	wantTP := "00-" + publish[0].SpanContext.TraceID().String() + "-" + publish[0].SpanContext.SpanID().String() + "-01"
	if got := byID[evs[0].ID]["traceparent"]; got != wantTP {
		t.Fatalf("sampled event's traceparent %q, want the publish span's %q", got, wantTP)
	}
	if got, want := byID[evs[1].ID]["traceparent"], "00-"+unsampledSC.TraceID().String()+"-"+unsampledSC.SpanID().String()+"-00"; got != want {
		t.Fatalf("unsampled event's traceparent %q, want the writer's %q", got, want)
	}
	if h := byID[evs[2].ID]; h["traceparent"] != "" {
		t.Fatalf("an event written outside a span got headers %v", h)
	}
}

// writeCtx is write with the writer's context (its span, if any).
func writeCtx(ctx context.Context, t *testing.T, s *postgres.Store, evs ...txbox.Event) {
	t.Helper()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgxtx.Add(ctx, tx, outbox.NewWriter(s.Dialect(), outbox.WithTracer(otel.NewTracer(nil))), evs...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
