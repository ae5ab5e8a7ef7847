// Package prom reports the relay's and the inbox's metrics to Prometheus:
// the relay.Metrics and inbox.Metrics hooks over
// client_golang, with the names, help, labels and buckets METRICS.md lists.
//
//	reg := prometheus.NewRegistry()
//	r, err := relay.New(relay.Config{..., Metrics: prom.NewRelayMetrics(reg)})
//	c, err := inbox.New(s, inbox.Config{..., Metrics: prom.NewInboxMetrics(reg)}, h)
//
// The collectors are registered when the relay or consumer is created
// (relay.New, inbox.New), and registration panics as MustRegister does:
// two relays on one registerer need one labelled apart
// (prometheus.WrapRegistererWith); consumers are labelled consumer=Name.
package prom

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/relay"
)

var (
	secondsBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	delayBuckets   = prometheus.ExponentialBuckets(0.001, 4, 12)  // 1 ms .. 70 min
	rowsBuckets    = prometheus.ExponentialBuckets(1, 2, 14)      // 1 .. 8192
)

// RelayMetrics is a relay's metrics on a Prometheus registerer
// (relay.Config.Metrics). Create it with NewRelayMetrics; give each relay
// its own.
type RelayMetrics struct {
	reg      prometheus.Registerer
	attached atomic.Bool

	claimSeconds, claimRows         prometheus.Histogram
	publishRound, commitDelay       prometheus.Histogram
	inFlight                        prometheus.Gauge
	markFailures, claimFailures     prometheus.Counter
	wakes                           *prometheus.CounterVec
	wakeListen, wakePoll, wakeBatch prometheus.Counter
	sampleErrors                    prometheus.Counter
}

var _ relay.Metrics = (*RelayMetrics)(nil)

// NewRelayMetrics returns a relay's metrics for reg (nil:
// prometheus.DefaultRegisterer). Wrap reg with prometheus.WrapRegistererWith
// to add labels such as the store. Nothing is registered until the relay
// is created.
func NewRelayMetrics(reg prometheus.Registerer) *RelayMetrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	hist := func(name, help string, b []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &RelayMetrics{
		reg:           reg,
		claimSeconds:  hist("txbox_relay_claim_seconds", "Duration of one claim statement.", secondsBuckets),
		claimRows:     hist("txbox_relay_claim_rows", "Rows returned by one claim that returned any.", rowsBuckets),
		publishRound:  hist("txbox_relay_publish_round_seconds", "Publish round trip: one pipelined publish of lane heads until the broker confirmed or failed every message.", secondsBuckets),
		commitDelay:   hist("txbox_relay_commit_to_publish_seconds", "From the row's created_at (the writer's transaction) to the broker's confirmation.", delayBuckets),
		inFlight:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "txbox_relay_batches_in_flight", Help: "Claimed batches being published or marked."}),
		markFailures:  counter("txbox_relay_mark_failures_total", "Batches whose marks failed; their rows are delivered again."),
		claimFailures: counter("txbox_relay_claim_failures_total", "Claims that failed (database errors)."),
		sampleErrors:  counter("txbox_outbox_sample_errors_total", "Backlog samples that failed."),
		wakes:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txbox_relay_wakeups_total", Help: "Waits after a short claim ended, by source: listen (a push wake-up), poll (the poll interval) or batch (one of the relay's own batches ended, freeing its aggregates)."}, []string{"source"}),
	}
	m.wakeListen = m.wakes.WithLabelValues(string(relay.WokeByListen))
	m.wakePoll = m.wakes.WithLabelValues(string(relay.WokeByPoll))
	m.wakeBatch = m.wakes.WithLabelValues(string(relay.WokeByBatch))
	return m
}

// Registerer is the registerer the metrics go to, for collectors of the
// same process that belong beside them (the CDC relay's slot lag).
func (m *RelayMetrics) Registerer() prometheus.Registerer { return m.reg }

const publishedHelp = "Publish outcomes: delivered (the broker confirmed), retried (row to RETRY, an attempt spent), deferred (row to RETRY for an outage of the way out, no attempt spent), dead (row to DEAD), held (row held behind a DEAD event of its aggregate: --dead-blocks)."

const backlogHelp = "Rows still to deliver, by status, sampled from the database."

// Attach registers the relay's collectors; the totals and gauges read
// state when scraped. It panics, as MustRegister does, when one of them is
// registered already.
func (m *RelayMetrics) Attach(state func() relay.Stats) {
	if m.attached.Swap(true) {
		panic("prom: a RelayMetrics serves one relay; call NewRelayMetrics for each")
	}
	fromCtr := func(name, help string, labels prometheus.Labels, f func(relay.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return float64(f(state())) })
	}
	gauge := func(name, help string, labels prometheus.Labels, f func(relay.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(state()) })
	}
	boolGauge := func(f func(relay.Stats) bool) func(relay.Stats) float64 {
		return func(s relay.Stats) float64 {
			if f(s) {
				return 1
			}
			return 0
		}
	}
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	cs := []prometheus.Collector{
		m.claimSeconds, m.claimRows, m.publishRound, m.commitDelay, m.inFlight, m.markFailures, m.claimFailures, m.sampleErrors, m.wakes,
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "delivered"}, func(s relay.Stats) int64 { return s.Published }),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "retried"}, func(s relay.Stats) int64 { return s.Retried }),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "deferred"}, func(s relay.Stats) int64 { return s.Deferred }),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "dead"}, func(s relay.Stats) int64 { return s.Dead }),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "held"}, func(s relay.Stats) int64 { return s.Held }),
		fromCtr("txbox_relay_claimed_total", "Rows claimed.", nil, func(s relay.Stats) int64 { return s.Claimed }),
		fromCtr("txbox_relay_released_total", "Claimed rows handed back unpublished (shutdown, lease nearly spent, an earlier row of the aggregate failed).", nil, func(s relay.Stats) int64 { return s.Released }),
		fromCtr("txbox_relay_lease_lost_total", "Marks refused because another relay took the rows over after the lease ran out.", nil, func(s relay.Stats) int64 { return s.LeaseLost }),
		gauge("txbox_outbox_backlog", backlogHelp, prometheus.Labels{"status": "pending"}, func(s relay.Stats) float64 { return float64(s.Backlog.Pending) }),
		gauge("txbox_outbox_backlog", backlogHelp, prometheus.Labels{"status": "retry"}, func(s relay.Stats) float64 { return float64(s.Backlog.Retry) }),
		gauge("txbox_outbox_backlog", backlogHelp, prometheus.Labels{"status": "processing"}, func(s relay.Stats) float64 { return float64(s.Backlog.Processing) }),
		gauge("txbox_outbox_dead", "DEAD rows waiting for an operator, sampled from the database.", nil, func(s relay.Stats) float64 { return float64(s.Backlog.Dead) }),
		gauge("txbox_outbox_blocked_aggregates", "Aggregates whose events are held behind a DEAD one (--dead-blocks) until it is replayed or purged, sampled from the database.", nil, func(s relay.Stats) float64 { return float64(s.Blocked.Aggregates) }),
		gauge("txbox_outbox_held", "Rows held behind a DEAD event of their aggregate (--dead-blocks), sampled from the database.", nil, func(s relay.Stats) float64 { return float64(s.Blocked.Rows) }),
		gauge("txbox_outbox_oldest_held_age_seconds", "Age of the oldest row held behind a DEAD event (0 when none), sampled from the database.", nil, func(s relay.Stats) float64 { return s.Blocked.OldestAge.Seconds() }),
		gauge("txbox_outbox_oldest_pending_age_seconds", "Age of the oldest PENDING, RETRY or PROCESSING row (0 when none), sampled from the database.", nil, func(s relay.Stats) float64 { return s.Backlog.OldestAge.Seconds() }),
		gauge("txbox_db_oldest_transaction_age_seconds", "Age of the database's oldest open transaction other than the sampler's (0: none, or the store cannot tell): it holds back the cleanup of dead rows. Sampled with the backlog.", nil, func(s relay.Stats) float64 { return s.Horizon.OldestTransaction.Seconds() }),
		gauge("txbox_db_dead_rows", "Row versions waiting for the database's cleanup: PostgreSQL, dead tuples of the outbox's tables; MySQL/MariaDB, the InnoDB history list length. Sampled with the backlog.", nil, func(s relay.Stats) float64 { return float64(s.Horizon.DeadRows) }),
		gauge("txbox_outbox_last_sample_timestamp_seconds", "When the backlog was last sampled successfully (unix time).", nil, func(s relay.Stats) float64 { return unix(s.SampledAt) }),
		gauge("txbox_relay_last_publish_timestamp_seconds", "When the broker last confirmed a message (unix time; 0: not yet).", nil, func(s relay.Stats) float64 { return unix(s.LastPublish) }),
		gauge("txbox_relay_broker_up", "1 while the broker takes publishes; 0 until the first publish or ping succeeded, and during a broker outage (a publish round that confirmed nothing and failed for the way out, or a failed ping of an idle relay's broker) until a publish is confirmed again.", nil, boolGauge(func(s relay.Stats) bool { return s.BrokerUp })),
		gauge("txbox_relay_destinations_down", "Destinations (rendered topics) refusing publishes for an outage of their own (no stream for the subject) while the broker takes others; their events wait without spending attempts.", nil, func(s relay.Stats) float64 { return float64(s.DestinationsDown) }),
		gauge("txbox_relay_database_up", "1 while the relay's claims and backlog samples succeed; 0 until the first success and after a failure, until the next success.", nil, boolGauge(func(s relay.Stats) bool { return s.DatabaseUp })),
		gauge("txbox_relay_ready", "1 when the relay is ready (see /readyz): database answers, broker confirms, oldest pending age and stall within bounds.", nil, boolGauge(func(s relay.Stats) bool { return s.Ready })),
	}
	for _, col := range cs {
		m.reg.MustRegister(col)
	}
}

func (m *RelayMetrics) Claimed(took time.Duration, rows int, err error) {
	m.claimSeconds.Observe(took.Seconds())
	switch {
	case err != nil:
		m.claimFailures.Inc()
	case rows > 0:
		m.claimRows.Observe(float64(rows))
	}
}

func (m *RelayMetrics) PublishRound(took time.Duration) { m.publishRound.Observe(took.Seconds()) }
func (m *RelayMetrics) Confirmed(delay time.Duration)   { m.commitDelay.Observe(delay.Seconds()) }
func (m *RelayMetrics) BatchStarted()                   { m.inFlight.Inc() }

func (m *RelayMetrics) BatchDone(markFailed bool) {
	m.inFlight.Dec()
	if markFailed {
		m.markFailures.Inc()
	}
}

func (m *RelayMetrics) Woke(source relay.WakeSource) {
	switch source {
	case relay.WokeByListen:
		m.wakeListen.Inc()
	case relay.WokeByPoll:
		m.wakePoll.Inc()
	case relay.WokeByBatch:
		m.wakeBatch.Inc()
	default:
		m.wakes.WithLabelValues(string(source)).Inc()
	}
}

func (m *RelayMetrics) BacklogSampled(err error) {
	if err != nil {
		m.sampleErrors.Inc()
	}
}

// InboxMetrics is a consumer's metrics on a Prometheus registerer, each
// labelled consumer=Name (inbox.Config.Metrics). Create it with
// NewInboxMetrics; give each consumer its own.
type InboxMetrics struct {
	reg         prometheus.Registerer
	attached    atomic.Bool
	handler, tx prometheus.Histogram
}

var _ inbox.Metrics = (*InboxMetrics)(nil)

// NewInboxMetrics returns a consumer's metrics for reg (nil:
// prometheus.DefaultRegisterer), so that a service that embeds a consumer
// shows them on its own /metrics. Nothing is registered until the consumer
// is created.
func NewInboxMetrics(reg prometheus.Registerer) *InboxMetrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	return &InboxMetrics{reg: reg}
}

// Attach registers the consumer's collectors, labelled consumer; the
// totals read state when scraped. It panics, as MustRegister does, when
// one of them is registered already.
func (m *InboxMetrics) Attach(consumer string, state func() inbox.Stats) {
	if m.attached.Swap(true) {
		// A second consumer would record its durations in the first one's
		// histograms.
		panic("prom: an InboxMetrics serves one consumer; call NewInboxMetrics for each")
	}
	labels := prometheus.Labels{"consumer": consumer}
	m.handler = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txbox_inbox_handler_seconds", Help: "Duration of the handler, per event.", ConstLabels: labels, Buckets: secondsBuckets})
	m.tx = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "txbox_inbox_transaction_seconds", Help: "Duration of one inbox transaction, begin to commit or rollback (TxBatch > 1: one per shared transaction).", ConstLabels: labels, Buckets: secondsBuckets})
	ctr := func(name, help string, f func(inbox.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return float64(f(state())) })
	}
	for _, col := range []prometheus.Collector{
		m.handler, m.tx,
		ctr("txbox_inbox_processed_total", "Events whose handler ran and committed.", func(s inbox.Stats) int64 { return s.Processed }),
		ctr("txbox_inbox_duplicates_total", "Deliveries of events already processed: acknowledged and skipped.", func(s inbox.Stats) int64 { return s.Duplicates }),
		ctr("txbox_inbox_failed_total", "Failed handler attempts (each attempt counts).", func(s inbox.Stats) int64 { return s.Failed }),
		ctr("txbox_inbox_parked_total", "Events parked (DEAD) after their last attempt, or refused by the store.", func(s inbox.Stats) int64 { return s.Parked }),
		ctr("txbox_inbox_undecodable_total", "Messages that were not txbox events, parked raw.", func(s inbox.Stats) int64 { return s.Undecodable }),
		ctr("txbox_inbox_skipped_total", "Events skipped by the version guard as stale.", func(s inbox.Stats) int64 { return s.Stale }),
		ctr("txbox_inbox_held_total", "Ordered: events held back to wait for their predecessor.", func(s inbox.Stats) int64 { return s.Held }),
		ctr("txbox_inbox_replayed_total", "Parked events applied again on an operator's replay request.", func(s inbox.Stats) int64 { return s.Replayed }),
		ctr("txbox_inbox_outage_waits_total", "Deliveries sent back for an outage (a database unavailable), spending no attempt.", func(s inbox.Stats) int64 { return s.OutageWaits }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "txbox_inbox_database_up", Help: "0 from the first failure that met an outage (the consumer's database, or one its handler needs, unavailable) until a delivery sent back for it gets through; else 1.", ConstLabels: labels},
			func() float64 {
				if state().DatabaseUp {
					return 1
				}
				return 0
			}),
	} {
		m.reg.MustRegister(col)
	}
}

func (m *InboxMetrics) Handled(took time.Duration, _ error) { m.handler.Observe(took.Seconds()) }
func (m *InboxMetrics) Transaction(took time.Duration)      { m.tx.Observe(took.Seconds()) }
