package relay

import "time"

// Metrics receives a relay's measurements (Config.Metrics); package
// telemetry/prom implements it for Prometheus. The relay calls its methods
// from several goroutines at once, some of them on the delivery path: they
// must be safe for concurrent use and must not block.
type Metrics interface {
	// Attach is called once, by New, before any other method. stats
	// returns the relay's running totals and its last sampled state
	// (Relay.Stats); it may be called from any goroutine at any time for
	// the life of the relay. A pull backend (Prometheus) reads it when
	// scraped; a push backend can read it in BacklogSampled.
	Attach(stats func() Stats)
	// Claimed: one claim statement took took and returned rows rows, or
	// failed with err (a database error; rows is then 0).
	Claimed(took time.Duration, rows int, err error)
	// PublishRound: one publish round (a pipelined publish until the broker
	// confirmed or failed every message) took took.
	PublishRound(took time.Duration)
	// Confirmed: the broker confirmed one message, delay after its row was
	// written (the row's created_at, the writer's transaction). Called
	// once per confirmed message.
	Confirmed(delay time.Duration)
	// BatchStarted and BatchDone bracket one claimed batch being published
	// and marked; markFailed: its marks failed, so its rows are delivered
	// again.
	BatchStarted()
	BatchDone(markFailed bool)
	// Woke says what ended a wait after a claim that did not fill a batch.
	Woke(source WakeSource)
	// BacklogSampled: the relay sampled its backlog from the database (every
	// Config.MetricsInterval, and for each readiness check); err is the
	// failure, nil when Stats now holds the new sample.
	BacklogSampled(err error)
}

// WakeSource is what ended a relay's wait between claims.
type WakeSource string

const (
	WokeByListen WakeSource = "listen" // a push wake-up (Config.Wakeup)
	WokeByPoll   WakeSource = "poll"   // the poll interval ran out
	WokeByBatch  WakeSource = "batch"  // one of the relay's own batches ended, freeing its aggregates
)
