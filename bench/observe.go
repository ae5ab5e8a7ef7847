package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Issue 18's cost check: the drain and the write path with metrics and
// tracing on, against the same contenders with them off.
//
// drain "txbox-tracedrows" drains the traced backlog (below) with tracing
// off: the baseline for "txbox-traced". "txbox-metrics" serves /metrics (nobody scrapes: the relay's side of
// the cost is the hot-path counters and histograms and the backlog sample);
// "txbox-traced" also exports one span per event over OTLP/HTTP to sink, a
// local endpoint that reads and drops the batches, and its backlog carries a
// writer's traceparent per row, so every publish span is a child and a link.
// write "txbox-traced" runs each business transaction inside a sampled span
// of a real SDK tracer (batch exporter to a discarding exporter), so the
// writer stores traceparent and tracestate in every event's headers.

// traceSink is an OTLP/HTTP endpoint that accepts and discards span batches.
func traceSink() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// withOTLP runs f with the OTEL_* variables a relay child reads pointing at
// a fresh sink.
func withOTLP(f func() (drainResult, error)) (drainResult, error) {
	url, stop, err := traceSink()
	if err != nil {
		return drainResult{}, err
	}
	defer stop()
	_ = os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	_ = os.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "65536")
	defer os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	defer os.Unsetenv("OTEL_BSP_MAX_QUEUE_SIZE")
	return f()
}

// writeTracedBacklog is writeTxboxBacklog with a writer's traceparent in
// every row's headers, as the write API stores it inside a span;
// sampledPct of the rows have the sampled flag (a head-sampling writer).
func (e *benchEnv) writeTracedBacklog(ctx context.Context, events, aggs, sampledPct int) error {
	return e.writeBacklog(ctx, "traced backlog", e.tables.Outbox, e.ordersInsert(`(g % $2)`,
		`json_build_object('traceparent', '00-' || md5(g::text) || '-' || substr(md5((g + 1)::text), 1, 16)
		                         || CASE WHEN g % 100 < $3 THEN '-01' ELSE '-00' END)`,
		`generate_series(1, $1) g`), events, aggs, sampledPct)
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchTP is the write contender's tracer provider: every span sampled,
// batched to an exporter that drops them. benchTracer makes the business
// transactions' spans; the writer stores their context through
// telemetry/otel (outbox.WithTracer).
var (
	benchTP     = sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	benchTracer = benchTP.Tracer("bench")
)
