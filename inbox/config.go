package inbox

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/telemetry"
)

// Config configures a Consumer. Zero fields take the documented default;
// Validate names the first bad field.
type Config struct {
	// Name is the consumer's name: with the event id, the inbox key. Two
	// processes with one name share the work and never both apply an event;
	// two names each apply every event. Required.
	Name string
	// Subscriber delivers the events (a durable consumer of the broker).
	Subscriber broker.Subscriber

	// MaxAttempts failed attempts park an event (DEAD). Default
	// DefaultMaxAttempts. A failure that is an outage is no attempt: the
	// handler's error says a database (or broker) is unavailable
	// (txbox.IsOutage: wrapped with txbox.DatabaseUnavailable or
	// txbox.Unavailable), or the store recognises its database's
	// unavailability in it (store.OutageClassifier: a lost connection, a
	// read-only or shutting-down server). Such a delivery is sent back
	// without recording anything, however long the outage lasts.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the redelivery delay after a failed
	// attempt. Defaults DefaultBackoffBase and DefaultBackoffMax. During an
	// outage the delay starts at BackoffBase and doubles with each receive
	// that meets it, up to BackoffMax but never above 30s, so the end of an
	// outage is noticed soon.
	BackoffBase, BackoffMax time.Duration

	// VersionGuard drops an event whose aggregate version is not above the
	// last one this consumer applied for its aggregate. Events without a
	// version (0) pass. A gap (5 then 7) is applied:
	// the guard protects against going backwards, not against a missing
	// event, which at-least-once delivery will still bring; when 6 arrives
	// after 7 it is skipped as stale and counted.
	VersionGuard bool
	// Ordered, with VersionGuard, applies each aggregate's events strictly
	// in version order: an event whose predecessor (version-1) has not been
	// applied yet is not applied; it counts as a failed attempt ("waiting
	// for version N") and comes back with backoff, so the predecessor,
	// delayed by a redelivery, gets in first. Versions must start at 1 and
	// have no holes; an event that never comes blocks its aggregate (and
	// only it) until its successors are parked. Events without a version
	// are not ordered. A successor that arrives first is held in memory,
	// unacknowledged (see HoldFor), and runs as soon as its predecessor
	// commits.
	Ordered bool

	// HoldFor is how long an Ordered delivery whose predecessor is missing
	// is held, unacknowledged, waiting for it; then it is sent back for
	// redelivery. Keep it well below the broker's ack wait: a subscriber
	// that says its ack wait (broker.AckWaiter, as every adapter's does)
	// lowers it to half that. Default DefaultHoldFor.
	HoldFor time.Duration
	// MaxHeld caps the deliveries held at once. Default DefaultMaxHeld.
	MaxHeld int

	// TxBatch is how many deliveries share one database transaction. 1 (the
	// default) is one transaction per event. Above 1, each event runs under
	// a SAVEPOINT inside the shared transaction: a failing event is rolled
	// back to its savepoint alone and retried as usual, the others commit
	// together, and only then are their deliveries acknowledged. Later
	// events of a failing event's aggregate in the same transaction are sent
	// back unapplied. Ordered gaps are not held in this mode; they are
	// retried with backoff. TxBatch is bounded by BatchSize: one receive's
	// deliveries at most share a transaction. On PostgreSQL each event that
	// writes is a subtransaction; above 64 per transaction the server's
	// per-session subtransaction cache overflows, which slows every
	// session's snapshots while it lasts, so keep TxBatch at 64 or below.
	TxBatch int

	// BatchSize is how many deliveries one receive takes. Default
	// DefaultBatchSize.
	BatchSize int
	// ReplayInterval is how often the consumer looks for replay requests.
	// Default DefaultReplayInterval.
	ReplayInterval time.Duration

	Logger *slog.Logger // default slog.Default()

	// Metrics, when set, receives the consumer's measurements: with
	// prom.NewInboxMetrics(reg) (package telemetry/prom) the Prometheus
	// metrics of METRICS.md on reg, each labelled consumer=Name, so a
	// service that embeds a consumer shows them on its own /metrics; nil:
	// no metrics. One per consumer.
	Metrics Metrics
	// Tracer, when set, wraps each handler call in a span that continues
	// the trace the event carries: with otel.NewTracer(tp) (package
	// telemetry/otel) an OpenTelemetry span continuing its traceparent.
	// nil: no tracing work at all.
	Tracer telemetry.Tracer
}

func (c *Config) withDefaults() {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.BackoffBase = cmp.Or(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultBackoffMax)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.TxBatch = cmp.Or(c.TxBatch, DefaultTxBatch)
	c.HoldFor = cmp.Or(c.HoldFor, DefaultHoldFor)
	c.MaxHeld = cmp.Or(c.MaxHeld, DefaultMaxHeld)
	c.ReplayInterval = cmp.Or(c.ReplayInterval, DefaultReplayInterval)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports the first invalid setting as a *txbox.ConfigError.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &txbox.ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case c.Name == "" || len(c.Name) > 128:
		return bad("Name", "required, at most 128 characters")
	case !plainText(c.Name):
		return bad("Name", "%q: must be valid UTF-8 without NUL bytes or surrounding spaces", c.Name)
	case c.Subscriber == nil:
		return bad("Subscriber", "required")
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "%d is below 1", c.MaxAttempts)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return bad("BackoffMax", "need 0 < BackoffBase (%v) <= BackoffMax (%v)", c.BackoffBase, c.BackoffMax)
	case c.Ordered && !c.VersionGuard:
		return bad("Ordered", "needs VersionGuard")
	case c.TxBatch < 1 || c.TxBatch > 10000:
		return bad("TxBatch", "%d is outside 1..10000", c.TxBatch)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return bad("BatchSize", "%d is outside 1..10000", c.BatchSize)
	}
	return nil
}

// RetryWindow is the longest an event can keep failing before it is
// parked: the sum of the largest delays of every attempt.
func (c Config) RetryWindow() time.Duration {
	cc := c
	cc.withDefaults()
	var total time.Duration
	d := cc.BackoffBase
	for i := 1; i < cc.MaxAttempts; i++ {
		total += min(d, cc.BackoffMax)
		if d < cc.BackoffMax {
			d *= 2
		}
	}
	return total
}
