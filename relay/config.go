package relay

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/telemetry"
)

// Config configures a Relay. Zero fields take the documented default;
// Validate names the first bad field.
type Config struct {
	Store     store.Outbox     // required
	Publisher broker.Publisher // required

	// Topic is the destination template over {aggregate_type} and
	// {event_type}. Default broker.DefaultTopic.
	Topic broker.Topic
	// Source is the CloudEvents "source" attribute. Default DefaultSource.
	Source string
	// ID names this relay in locked_by. Default host-pid-random.
	ID string

	// BatchSize is the most rows one claim takes. Default DefaultBatchSize.
	BatchSize int
	// Workers is how many claimed batches are published and marked at
	// once; claims themselves run one at a time. Default DefaultWorkers.
	Workers int
	// PollInterval is the time from the start of a claim that found
	// nothing to the next claim, when no wake-up arrives (the pause after
	// a claim is never under half of it); on an idle relay it grows up to
	// IdlePollMax. It also bounds a busy relay's wait for one of its own
	// batches to end. Default DefaultPollInterval.
	PollInterval time.Duration
	// IdlePollMax caps an idle relay's back-off. While its claims keep
	// finding nothing (and nothing of its own is in flight), each wait
	// doubles, from PollInterval up to IdlePollMax; a claim that finds
	// work, a wake-up or the end of one of its batches sets it back to
	// PollInterval. It is the longest a row written without a wake-up waits
	// on an idle relay. Equal to PollInterval: no back-off. Default
	// min(DefaultIdlePollMax, 2 x PollInterval), or PollInterval when
	// that is longer.
	IdlePollMax time.Duration
	// Wakeup, when set, makes an idle relay claim at once on a receive
	// (push wake-ups such as PostgreSQL LISTEN); polling stays the fallback.
	Wakeup <-chan struct{}
	// Lease is how long claimed rows stay reserved for this relay. Another
	// relay may take them over after that. Default DefaultLease.
	Lease time.Duration
	// Claims chooses how claimed rows are reserved. "" or ClaimAuto: by the
	// open transaction of the claim where the store can (PostgreSQL: the row
	// locks are the reservation, nothing is written to take it, and a dead
	// relay's rows are free the moment its connection drops), else by a
	// lease written into the rows. ClaimLease: always a lease, for poolers
	// that cannot keep a transaction on one connection (PgBouncer statement
	// pooling) or to hold rows visibly as PROCESSING.
	Claims ClaimMode
	// PublishTimeout bounds one publish round. Default
	// min(10s, Lease/3). It must be at most half
	// of Lease, so a relay never publishes a row whose lease it no longer
	// holds.
	PublishTimeout time.Duration

	// MaxAttempts is how many failed publishes send a row to DEAD.
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retry delay: attempt n waits
	// between half and all of min(BackoffMax, BackoffBase * 2^(n-1)).
	// Defaults DefaultBackoffBase and DefaultBackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// OutageProbeMax caps the wait between probes of a broker that is out
	// (unreachable, not confirming, no stream for a subject): such a
	// failure spends no attempt, pauses claiming, and is probed at
	// intervals doubling from BackoffBase up to this, so a broker that
	// comes back is used within one interval. It also caps how long the
	// events of a destination that refuses publishes wait between tries.
	// Default DefaultOutageProbeMax.
	OutageProbeMax time.Duration

	Logger *slog.Logger // default slog.Default()

	// Metrics, when set, receives the relay's measurements: with
	// prom.NewRelayMetrics(reg) (package telemetry/prom) the Prometheus
	// metrics of METRICS.md on reg; nil: no metrics. One per relay.
	Metrics Metrics
	// Tracer, when set, makes a publish span per event, a child of the
	// writer's span, and carries its trace context on the wire: with
	// otel.NewTracer(tp) (package telemetry/otel) an OpenTelemetry span and
	// its traceparent. nil: no tracing work at all.
	Tracer telemetry.Tracer
	// MetricsInterval is how often the backlog is sampled from the
	// database for the gauges, readiness and the progress log. Default 5s.
	MetricsInterval time.Duration
	// ProgressEvery is how often a working relay logs a progress line
	// (nothing while idle). Default 10s.
	ProgressEvery time.Duration
	// MaxPendingAge makes Ready fail while the oldest pending row is older;
	// 0: no limit.
	MaxPendingAge time.Duration
	// StallAfter makes Ready fail while rows wait and nothing was published
	// for this long; 0: no limit.
	StallAfter time.Duration
	// LongTransactionWarn logs a warning, and Stats.Horizon carries the
	// holder, while a transaction of the database (not the relay's) has
	// been open for longer: it holds back the cleanup of the dead rows
	// the outbox leaves, and claims slow down reading past them. Sampled
	// with the backlog, where the store can (store.HorizonSampler); 0:
	// no warning.
	LongTransactionWarn time.Duration

	// DeadBlocks names the aggregate types whose DEAD events hold back the
	// later events of their aggregate until the DEAD one is replayed or
	// purged ("*": every type); by default a DEAD event does not block its
	// aggregate. Every relay of a table needs the same list: a relay
	// releases the held rows behind types it does not block. Needs a store
	// that can hold rows (store.DeadBlocker); see deadblock.go.
	DeadBlocks []string
}

func (c *Config) withDefaults() {
	c.Topic = cmp.Or(c.Topic, broker.DefaultTopic)
	c.Source = cmp.Or(c.Source, DefaultSource)
	if c.ID == "" {
		c.ID = defaultID()
	}
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	// Twice a short poll interval at most: a user who asks for 10ms polls
	// asks for rows to wait about that long, after a quiet spell too, not
	// DefaultIdlePollMax.
	c.IdlePollMax = cmp.Or(c.IdlePollMax, max(c.PollInterval, min(DefaultIdlePollMax, 2*c.PollInterval)))
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, publishTimeoutFor(c.Lease))
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.BackoffBase = cmp.Or(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultBackoffMax)
	c.OutageProbeMax = cmp.Or(c.OutageProbeMax, DefaultOutageProbeMax)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MetricsInterval = cmp.Or(c.MetricsInterval, 5*time.Second)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, 10*time.Second)
}

// Validate reports the first invalid setting as a *txbox.ConfigError.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil:
		return &txbox.ConfigError{Field: "Store", Reason: "required"}
	case c.Publisher == nil:
		return &txbox.ConfigError{Field: "Publisher", Reason: "required"}
	}
	return c.ValidateSettings()
}

// ValidateSettings checks everything but Store and Publisher, with defaults
// applied, so a command can reject bad settings before it connects.
func (c Config) ValidateSettings() error {
	c.withDefaults()
	bad := func(field, format string, a ...any) error {
		return &txbox.ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return bad("BatchSize", "%d is outside 1..10000", c.BatchSize)
	case c.Workers < 1 || c.Workers > 64:
		return bad("Workers", "%d is outside 1..64", c.Workers)
	case c.PollInterval < time.Millisecond:
		return bad("PollInterval", "%v is below 1ms", c.PollInterval)
	case c.IdlePollMax < c.PollInterval:
		return bad("IdlePollMax", "%v is below PollInterval %v", c.IdlePollMax, c.PollInterval)
	case c.Lease < 100*time.Millisecond:
		return bad("Lease", "%v is below 100ms", c.Lease)
	case c.PublishTimeout <= 0 || c.PublishTimeout*2 > c.Lease:
		return bad("PublishTimeout", "%v must be positive and at most half of Lease (%v)", c.PublishTimeout, c.Lease)
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "%d is below 1", c.MaxAttempts)
	case c.BackoffBase <= 0:
		return bad("BackoffBase", "%v must be positive", c.BackoffBase)
	case c.BackoffMax < c.BackoffBase:
		return bad("BackoffMax", "%v is below BackoffBase %v", c.BackoffMax, c.BackoffBase)
	case c.OutageProbeMax < 10*time.Millisecond:
		return bad("OutageProbeMax", "%v is below 10ms", c.OutageProbeMax)
	case c.Claims != "" && c.Claims != ClaimAuto && c.Claims != ClaimLease:
		return bad("Claims", "%q: want auto or lease", c.Claims)
	case len(c.ID) > 100:
		return bad("ID", "longer than 100 characters")
	case c.MetricsInterval < 10*time.Millisecond:
		return bad("MetricsInterval", "%v is below 10ms", c.MetricsInterval)
	case c.ProgressEvery < 0:
		return bad("ProgressEvery", "%v is negative", c.ProgressEvery)
	case c.MaxPendingAge < 0:
		return bad("MaxPendingAge", "%v is negative", c.MaxPendingAge)
	case c.StallAfter < 0:
		return bad("StallAfter", "%v is negative", c.StallAfter)
	case c.LongTransactionWarn < 0:
		return bad("LongTransactionWarn", "%v is negative", c.LongTransactionWarn)
	case c.BackoffMax > maxDelay || c.OutageProbeMax > maxDelay:
		return bad("BackoffMax", "%v or OutageProbeMax %v is over %v: a row due so late would look held behind a DEAD event", c.BackoffMax, c.OutageProbeMax, maxDelay)
	}
	for _, t := range c.DeadBlocks {
		switch {
		case t == "":
			return bad("DeadBlocks", "an empty aggregate type")
		case len(t) > 64:
			return bad("DeadBlocks", "%q is longer than an aggregate type (64)", t)
		case t == "*" && len(c.DeadBlocks) > 1:
			return bad("DeadBlocks", `"*" (every type) with other types`)
		}
	}
	return c.Topic.Validate()
}

// maxDelay bounds the retry delays, well below the held rows' due time
// (store.HeldAfter).
const maxDelay = 10 * 365 * 24 * time.Hour

func defaultID() string {
	host, _ := os.Hostname()
	if len(host) > 60 {
		host = host[:60]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
