package otel

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context, also the CloudEvents
// distributed-tracing extension attributes.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// w3c is the W3C propagator, for the traceparent forms remote does not
// parse itself.
var w3c = propagation.TraceContext{}

// inject returns h with ctx's span context as traceparent and tracestate.
// When ctx carries no valid span, or h has a traceparent already (the
// producer set it), h is returned as it is: no copy, no allocation. h itself
// is never modified; a new map is returned.
func inject(ctx context.Context, h map[string]string) map[string]string {
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
	set(out, sc)
	return out
}

// set writes sc into h (which must not be nil) as traceparent and
// tracestate, replacing what was there.
func set(h map[string]string, sc trace.SpanContext) {
	h[TraceParent] = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + hex.EncodeToString([]byte{byte(sc.TraceFlags())})
	if ts := sc.TraceState(); ts.Len() > 0 {
		h[TraceState] = ts.String()
	} else {
		delete(h, TraceState)
	}
}

// remote returns the span context h's traceparent names (invalid if none).
// The common form (version 00) is parsed here without allocating a
// context; anything else goes through the W3C propagator.
func remote(h map[string]string) trace.SpanContext {
	tp := h[TraceParent]
	if tp == "" {
		return trace.SpanContext{}
	}
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(h)))
	}
	tid, err1 := trace.TraceIDFromHex(tp[3:35])
	sid, err2 := trace.SpanIDFromHex(tp[36:52])
	flags, err3 := hex.DecodeString(tp[53:])
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true}
	if ts := h[TraceState]; ts != "" {
		if state, err := trace.ParseTraceState(ts); err == nil {
			cfg.TraceState = state
		}
	}
	return trace.NewSpanContext(cfg)
}
