// Package depcheck holds a test only: dependencies point one way. The core
// packages (txbox, outbox, relay, inbox, store, broker, pgxtx, console,
// telemetry) never depend on an adapter, a database driver, a broker client
// or a metrics or tracing library (Prometheus, OpenTelemetry: those are
// telemetry/prom's and telemetry/otel's), and no store or broker adapter
// pulls in another one's driver or client. The relay compiles at most 120
// packages.
package depcheck
