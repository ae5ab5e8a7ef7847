package inbox

import "time"

// Metrics receives a consumer's measurements (Config.Metrics); package
// telemetry/prom implements it for Prometheus. Its methods are called from
// the consumer's goroutines, on the delivery path: they must be safe for
// concurrent use and must not block.
type Metrics interface {
	// Attach is called once, by New, before any other method, with the
	// consumer's name (Config.Name) and its running totals
	// (Consumer.Stats); stats may be called from any goroutine at any time
	// for the life of the consumer.
	Attach(consumer string, stats func() Stats)
	// Handled: one handler call (one attempt at an event) took took and
	// returned err.
	Handled(took time.Duration, err error)
	// Transaction: one inbox transaction, begin to commit or rollback, took
	// took (Config.TxBatch above 1: one per shared transaction).
	Transaction(took time.Duration)
}
