// Package tracing carries W3C trace context (traceparent, tracestate) in
// event headers. It uses only the OpenTelemetry API: the SDK and exporters
// are the binary's business (cmd/txbox), never the library's.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context, also the CloudEvents
// distributed-tracing extension attributes.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

var w3c = propagation.TraceContext{}

// Inject returns h with ctx's span context as traceparent and tracestate.
// When ctx carries no valid span, or h has a traceparent already (the
// producer set it), h is returned as it is: no copy, no allocation. h itself
// is never modified; a new map is returned.
func Inject(ctx context.Context, h map[string]string) map[string]string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h
	}
	if _, ok := h[TraceParent]; ok {
		return h
	}
	out := make(map[string]string, len(h)+2)
	for k, v := range h {
		out[k] = v
	}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.MapCarrier(out))
	return out
}

// Set writes sc into h (which must not be nil) as traceparent and
// tracestate, replacing what was there.
func Set(h map[string]string, sc trace.SpanContext) {
	delete(h, TraceState)
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.MapCarrier(h))
}

// Remote returns the span context h's traceparent names (invalid if none).
func Remote(h map[string]string) trace.SpanContext {
	if h[TraceParent] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(h)))
}
