package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/txbox/txbox"
)

// setupTracing configures an OTLP/HTTP trace exporter from the standard
// OTEL_* environment variables (endpoint, headers, sampler, service name,
// resource attributes, all read by the SDK itself). With no OTLP endpoint
// set, or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none, it returns a
// nil provider: the relay then does no tracing work at all.
func setupTracing(ctx context.Context, log *slog.Logger) (trace.TracerProvider, func(), error) {
	off := func() {}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, off, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, off, nil
	case "", "otlp":
	default:
		return nil, off, &txbox.ConfigError{Field: "OTEL_TRACES_EXPORTER", Reason: fmt.Sprintf("%q: want otlp or none", exp)}
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, off, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(k); v != "" && v != "http/protobuf" {
			return nil, off, &txbox.ConfigError{Field: k, Reason: fmt.Sprintf("%q: this build exports over http/protobuf only", v)}
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, off, &txbox.ConfigError{Field: "OTEL_EXPORTER_OTLP_ENDPOINT", Reason: err.Error()}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	log.Info("tracing: exporting spans over OTLP/HTTP")
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing spans failed", "err", err)
		}
	}, nil
}
