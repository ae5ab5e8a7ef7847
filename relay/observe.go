package relay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/store"
)

// observer is the relay's metrics, health state and progress log. Its hot
// path is a few atomic adds and histogram observations; with Config.Metrics
// nil the histograms are nil and skipped.
type observer struct {
	r       *Relay
	sampler store.BacklogSampler // nil: the store cannot sample its backlog

	claimSeconds, claimRows         prometheus.Histogram
	publishRound, commitDelay       prometheus.Histogram
	inFlight                        prometheus.Gauge
	markFailures, claimFailures     prometheus.Counter
	wakeListen, wakePoll, wakeBatch prometheus.Counter
	sampleErrors                    prometheus.Counter

	pinger      broker.Pinger // nil: the publisher cannot be pinged
	started     time.Time
	beat        atomic.Int64 // unix ns: the claim loop went round
	lastRound   atomic.Int64 // unix ns: a publish round ended
	lastPublish atomic.Int64 // unix ns: the broker last confirmed a message
	// firstPublish is when the progress window's first confirmed round
	// began (0: none yet): the window's publishing time runs from it to
	// lastPublish.
	firstPublish atomic.Int64

	// The database's state as the claims and samples see it: down from
	// the first failure to the next success, unknown until either.
	dbMu    sync.Mutex
	dbKnown bool
	dbDown  time.Time // zero: up
	dbErr   error

	mu         sync.Mutex
	backlog    store.Backlog
	sampledAt  time.Time
	sampleErr  error
	lastReady  error
	progressAt time.Time
	progressN  int64 // Published at progressAt
	progressD  int64 // Dead at progressAt
	progressF  int64 // Deferred at progressAt
}

var (
	secondsBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	delayBuckets   = prometheus.ExponentialBuckets(0.001, 4, 12)  // 1 ms .. 70 min
	rowsBuckets    = prometheus.ExponentialBuckets(1, 2, 14)      // 1 .. 8192
)

func newObserver(r *Relay) *observer {
	// Not ready until the first sample says otherwise.
	o := &observer{r: r, started: time.Now(), lastReady: fmt.Errorf("%w: starting", ErrNotReady)}
	o.sampler, _ = r.cfg.Store.(store.BacklogSampler)
	o.pinger, _ = r.cfg.Publisher.(broker.Pinger)
	if o.sampler != nil {
		r.out.backlog = func() int64 { o.mu.Lock(); defer o.mu.Unlock(); return o.backlog.Unsent() }
	}
	o.beat.Store(o.started.UnixNano())
	if r.cfg.Metrics != nil {
		o.register(r.cfg.Metrics)
	}
	return o
}

func (o *observer) register(reg prometheus.Registerer) {
	c := &o.r.ctrs
	hist := func(name, help string, b []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	fromCtr := func(name, help string, labels prometheus.Labels, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	o.claimSeconds = hist("txbox_relay_claim_seconds", "Duration of one claim statement.", secondsBuckets)
	o.claimRows = hist("txbox_relay_claim_rows", "Rows returned by one claim that returned any.", rowsBuckets)
	o.publishRound = hist("txbox_relay_publish_round_seconds", "Publish round trip: one pipelined publish of lane heads until the broker confirmed or failed every message.", secondsBuckets)
	o.commitDelay = hist("txbox_relay_commit_to_publish_seconds", "From the row's created_at (the writer's transaction) to the broker's confirmation.", delayBuckets)
	o.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "txbox_relay_batches_in_flight", Help: "Claimed batches being published or marked."})
	o.markFailures = counter("txbox_relay_mark_failures_total", "Batches whose marks failed; their rows are delivered again.")
	o.claimFailures = counter("txbox_relay_claim_failures_total", "Claims that failed (database errors).")
	o.sampleErrors = counter("txbox_outbox_sample_errors_total", "Backlog samples that failed.")
	wakes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txbox_relay_wakeups_total", Help: "Waits after a short claim ended, by source: listen (a push wake-up), poll (the poll interval) or batch (one of the relay's own batches ended, freeing its aggregates)."}, []string{"source"})
	o.wakeListen, o.wakePoll, o.wakeBatch = wakes.WithLabelValues("listen"), wakes.WithLabelValues("poll"), wakes.WithLabelValues("batch")
	sample := func(f func(b store.Backlog) float64) func() float64 {
		return func() float64 { o.mu.Lock(); defer o.mu.Unlock(); return f(o.backlog) }
	}
	boolGauge := func(f func() bool) func() float64 {
		return func() float64 {
			if f() {
				return 1
			}
			return 0
		}
	}
	cs := []prometheus.Collector{
		o.claimSeconds, o.claimRows, o.publishRound, o.commitDelay, o.inFlight, o.markFailures, o.claimFailures, o.sampleErrors, wakes,
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "delivered"}, &c.Published),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "retried"}, &c.Retried),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "deferred"}, &c.Deferred),
		fromCtr("txbox_relay_published_total", publishedHelp, prometheus.Labels{"outcome": "dead"}, &c.Dead),
		fromCtr("txbox_relay_claimed_total", "Rows claimed.", nil, &c.Claimed),
		fromCtr("txbox_relay_released_total", "Claimed rows handed back unpublished (shutdown, lease nearly spent, an earlier row of the aggregate failed).", nil, &c.Released),
		fromCtr("txbox_relay_lease_lost_total", "Marks refused because another relay took the rows over after the lease ran out.", nil, &c.LeaseLost),
		gauge("txbox_outbox_backlog", "Rows still to deliver, by status, sampled from the database.", prometheus.Labels{"status": "pending"}, sample(func(b store.Backlog) float64 { return float64(b.Pending) })),
		gauge("txbox_outbox_backlog", "Rows still to deliver, by status, sampled from the database.", prometheus.Labels{"status": "retry"}, sample(func(b store.Backlog) float64 { return float64(b.Retry) })),
		gauge("txbox_outbox_backlog", "Rows still to deliver, by status, sampled from the database.", prometheus.Labels{"status": "processing"}, sample(func(b store.Backlog) float64 { return float64(b.Processing) })),
		gauge("txbox_outbox_dead", "DEAD rows waiting for an operator, sampled from the database.", nil, sample(func(b store.Backlog) float64 { return float64(b.Dead) })),
		gauge("txbox_outbox_oldest_pending_age_seconds", "Age of the oldest PENDING, RETRY or PROCESSING row (0 when none), sampled from the database.", nil, sample(func(b store.Backlog) float64 { return b.OldestAge.Seconds() })),
		gauge("txbox_outbox_last_sample_timestamp_seconds", "When the backlog was last sampled successfully (unix time).", nil, func() float64 {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.sampledAt.IsZero() {
				return 0
			}
			return float64(o.sampledAt.UnixNano()) / 1e9
		}),
		gauge("txbox_relay_last_publish_timestamp_seconds", "When the broker last confirmed a message (unix time; 0: not yet).", nil, func() float64 { return float64(o.lastPublish.Load()) / 1e9 }),
		gauge("txbox_relay_broker_up", "1 while the broker takes publishes; 0 until the first publish or ping succeeded, and during a broker outage (a publish round that confirmed nothing and failed for the way out, or a failed ping of an idle relay's broker) until a publish is confirmed again.", nil, boolGauge(func() bool { return o.r.out.state().brokerUp() })),
		gauge("txbox_relay_destinations_down", "Destinations (rendered topics) refusing publishes for an outage of their own (no stream for the subject) while the broker takes others; their events wait without spending attempts.", nil, func() float64 { return float64(o.r.out.state().dests) }),
		gauge("txbox_relay_database_up", "1 while the relay's claims and backlog samples succeed; 0 until the first success and after a failure, until the next success.", nil, boolGauge(func() bool {
			o.dbMu.Lock()
			defer o.dbMu.Unlock()
			return o.dbKnown && o.dbDown.IsZero()
		})),
		gauge("txbox_relay_ready", "1 when the relay is ready (see /readyz): database answers, broker confirms, oldest pending age and stall within bounds.", nil, boolGauge(func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.lastReady == nil
		})),
	}
	for _, col := range cs {
		reg.MustRegister(col)
	}
}

// claimed records one claim.
func (o *observer) claimed(took time.Duration, rows int, err error) {
	o.database(err, "claims")
	if o.claimSeconds == nil {
		return
	}
	o.claimSeconds.Observe(took.Seconds())
	switch {
	case err != nil:
		o.claimFailures.Inc()
	case rows > 0:
		o.claimRows.Observe(float64(rows))
	}
}

// published records one publish round: its duration, each confirmed
// message's delay since it was written, and whether the broker is up.
// published records a publish round: created holds the created_at of each
// message, errs its outcome.
func (o *observer) published(start time.Time, created []time.Time, errs []error) {
	now := time.Now()
	ok := false
	for i, err := range errs {
		if err == nil {
			ok = true
			if o.commitDelay != nil {
				o.commitDelay.Observe(now.Sub(created[i]).Seconds())
			}
		}
	}
	if o.publishRound != nil {
		o.publishRound.Observe(now.Sub(start).Seconds())
	}
	o.lastRound.Store(now.UnixNano())
	if ok {
		o.lastPublish.Store(now.UnixNano())
		o.firstPublish.CompareAndSwap(0, start.UnixNano())
	}
}

// database records the outcome of a statement of the relay's own (a claim,
// a backlog sample): the first failure logs that the database is
// unavailable, the next success that it is back and for how long it was
// not; failures in between log at debug level, so an outage of an hour is
// two lines, not one per retry.
func (o *observer) database(err error, what string) {
	now := time.Now()
	o.dbMu.Lock()
	o.dbKnown = true
	was := o.dbDown
	switch {
	case err != nil && was.IsZero():
		o.dbDown, o.dbErr = now, err
	case err != nil:
		o.dbErr = err
	default:
		o.dbDown, o.dbErr = time.Time{}, nil
	}
	o.dbMu.Unlock()
	switch {
	case err != nil && was.IsZero():
		o.r.log.Warn("database unavailable: "+what+" failing, retrying; events keep their attempts", "err", err)
	case err != nil:
		o.r.log.Debug("database still unavailable", "what", what, "err", err)
	case !was.IsZero():
		o.r.log.Info("database back", "lasted", now.Sub(was).Round(time.Millisecond).String())
	}
}

func (o *observer) batchStarted() {
	if o.inFlight != nil {
		o.inFlight.Inc()
	}
}

func (o *observer) batchDone(err error) {
	if o.inFlight != nil {
		o.inFlight.Dec()
		if err != nil {
			o.markFailures.Inc()
		}
	}
}

// woke says what ended a wait.
type woke int

const publishedHelp = "Publish outcomes: delivered (the broker confirmed), retried (row to RETRY, an attempt spent), deferred (row to RETRY for an outage of the way out, no attempt spent), dead (row to DEAD)."

const (
	wokeByPoll   woke = iota + 1 // the wait ran its full time
	wokeByListen                 // a push wake-up (Config.Wakeup)
	wokeByBatch                  // one of this relay's batches ended
)

// wait waits d (PollInterval, or an idle relay's longer back-off), a
// wake-up, or the end of one of this relay's batches (ended; nil when none
// is in flight), counting which one ended the wait and returning it; ok is
// false when ctx ended.
func (r *Relay) wait(ctx context.Context, d time.Duration, ended <-chan struct{}) (by woke, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	var c prometheus.Counter
	select {
	case <-ctx.Done():
		return 0, false
	case <-t.C:
		by, c = wokeByPoll, r.obs.wakePoll
	case <-r.cfg.Wakeup:
		by, c = wokeByListen, r.obs.wakeListen
	case <-ended:
		by, c = wokeByBatch, r.obs.wakeBatch
	}
	if c != nil {
		c.Inc()
	}
	return by, true
}

// watch samples the backlog every MetricsInterval, keeps the readiness
// verdict current and logs progress, until ctx ends.
func (o *observer) watch(ctx context.Context) {
	t := time.NewTicker(o.r.cfg.MetricsInterval)
	defer t.Stop()
	o.mu.Lock()
	c := &o.r.ctrs
	o.progressAt, o.progressN, o.progressD, o.progressF = time.Now(), c.Published.Load(), c.Dead.Load(), c.Deferred.Load()
	o.mu.Unlock()
	for {
		o.sample(ctx)
		o.progress()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads the backlog once, pings an idle relay's broker, and
// re-evaluates readiness.
func (o *observer) sample(ctx context.Context) {
	o.pingIfIdle(ctx)
	var b store.Backlog
	var err error
	if o.sampler != nil {
		sctx, cancel := context.WithTimeout(ctx, max(o.r.cfg.MetricsInterval, time.Second))
		b, err = o.sampler.Backlog(sctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			return // shutting down
		}
		o.database(err, "backlog samples")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sampleErr = err
	if err != nil {
		if o.sampleErrors != nil {
			o.sampleErrors.Inc()
		}
		o.r.log.Debug("sampling the backlog failed", "err", err)
	} else {
		o.backlog, o.sampledAt = b, time.Now()
	}
	o.lastReady = o.readyLocked()
}

// pingIfIdle asks the broker whether it answers when no publish round
// ended within the last MetricsInterval: with traffic the rounds tell.
func (o *observer) pingIfIdle(ctx context.Context) {
	if o.pinger == nil || time.Since(time.Unix(0, o.lastRound.Load())) < o.r.cfg.MetricsInterval {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, min(o.r.cfg.PublishTimeout, 5*time.Second))
	err := o.pinger.Ping(pctx)
	cancel()
	if ctx.Err() != nil {
		return // shutting down
	}
	o.r.out.ping(err, false)
}

// progress logs one line per ProgressEvery while the relay works: something
// was published, or a backlog is waiting. An idle relay stays silent. The
// rate is over the time spent publishing in the window (from its first
// confirmed round to its last), not the whole window: 15,000 events sent in
// 2 s of a 10 s window read as 7,500/s. dead_marked and deferred count what
// this relay did in the window; dead_in_table is the table's DEAD rows.
func (o *observer) progress() {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if now.Sub(o.progressAt) < o.r.cfg.ProgressEvery {
		return
	}
	c := &o.r.ctrs
	n, dead, deferred := c.Published.Load(), c.Dead.Load(), c.Deferred.Load()
	sent, took := n-o.progressN, now.Sub(o.progressAt)
	busy := time.Duration(0)
	if first := o.firstPublish.Swap(0); first != 0 && sent > 0 {
		busy = min(max(time.Duration(o.lastPublish.Load()-first), time.Millisecond), took)
	}
	deadN, deferredN := dead-o.progressD, deferred-o.progressF
	o.progressAt, o.progressN, o.progressD, o.progressF = now, n, dead, deferred
	if sent == 0 && o.backlog.Unsent() == 0 {
		return
	}
	rate := int64(0)
	if busy > 0 {
		rate = int64(float64(sent)/busy.Seconds() + 0.5)
	}
	o.r.log.Info("relay progress", "published", sent, "rate_per_s", rate, "publishing", busy.Round(time.Millisecond).String(),
		"window", took.Round(time.Millisecond).String(), "backlog", o.backlog.Unsent(), "oldest_age", o.backlog.OldestAge.Round(time.Millisecond).String(),
		"dead_marked", deadN, "deferred", deferredN, "dead_in_table", o.backlog.Dead)
}

// eventAttrs are the attributes every log line about an event carries,
// followed by more.
func eventAttrs(rec store.Record, more ...any) []any {
	return append([]any{"event_id", rec.EventID, "aggregate_type", rec.AggregateType, "aggregate_id", rec.AggregateID, "event_type", rec.EventType}, more...)
}
