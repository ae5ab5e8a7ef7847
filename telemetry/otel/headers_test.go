package otel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// set and remote agree with the W3C propagator both ways, and inject leaves
// a producer's own traceparent and a context without a span alone.
func TestHeadersMatchW3C(t *testing.T) {
	ts, _ := trace.ParseTraceState("vendor=x")
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1, 2, 3}, SpanID: [8]byte{4, 5}, TraceFlags: flags, TraceState: ts})
		mine := map[string]string{"x": "y"}
		set(mine, sc)
		theirs := map[string]string{}
		w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.MapCarrier(theirs))
		if mine[TraceParent] != theirs[TraceParent] || mine[TraceState] != theirs[TraceState] || mine["x"] != "y" {
			t.Fatalf("set %v, propagator %v", mine, theirs)
		}
		got := remote(theirs)
		want := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(theirs)))
		if !got.Equal(want) || !got.IsValid() || !got.IsRemote() {
			t.Fatalf("remote %v, propagator %v", got, want)
		}
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-0000000000000000-01", "zz-0102", "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-zz"} {
		if remote(map[string]string{TraceParent: bad}).IsValid() {
			t.Errorf("remote(%q) is valid", bad)
		}
	}
	own := map[string]string{TraceParent: "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{9}, SpanID: [8]byte{9}}))
	if got := inject(ctx, own); got[TraceParent] != own[TraceParent] {
		t.Fatalf("inject replaced the producer's traceparent: %v", got)
	}
	if got := inject(context.Background(), own); len(got) != 1 {
		t.Fatalf("inject without a span changed the headers: %v", got)
	}
	if got := inject(ctx, nil); !remote(got).IsValid() {
		t.Fatalf("inject with a span: %v", got)
	}
}
