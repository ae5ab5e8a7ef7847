package relay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/store"
)

// observer is the relay's metrics, health state and progress log. Its hot
// path is a few atomic adds and calls of the metrics hook; with
// Config.Metrics nil the hook is nil and skipped.
type observer struct {
	r       *Relay
	sampler store.BacklogSampler // nil: the store cannot sample its backlog
	hz      horizonWatch
	blocked store.Blocked // the last sample of held rows (deadblock.go)
	// heldSwept: releaseHeld ran once (the watch goroutine's only).
	heldSwept bool
	m         Metrics // nil: no metrics

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

func newObserver(r *Relay) *observer {
	// Not ready until the first sample says otherwise.
	o := &observer{r: r, started: time.Now(), lastReady: fmt.Errorf("%w: starting", ErrNotReady)}
	o.sampler, _ = r.cfg.Store.(store.BacklogSampler)
	o.hz.sampler, _ = r.cfg.Store.(store.HorizonSampler)
	o.pinger, _ = r.cfg.Publisher.(broker.Pinger)
	if o.sampler != nil {
		r.out.backlog = func() int64 { o.mu.Lock(); defer o.mu.Unlock(); return o.backlog.Unsent() }
	}
	o.beat.Store(o.started.UnixNano())
	o.m = r.cfg.Metrics
	return o
}

// state fills in s the relay's last sampled state.
func (o *observer) state(s *Stats) {
	o.mu.Lock()
	s.Backlog = o.backlog
	s.SampledAt = o.sampledAt
	s.Horizon = o.hz.last
	s.Blocked = o.blocked
	s.Ready = o.lastReady == nil
	o.mu.Unlock()
	if ns := o.lastPublish.Load(); ns != 0 {
		s.LastPublish = time.Unix(0, ns)
	}
	out := o.r.out.state()
	s.BrokerUp, s.DestinationsDown = out.brokerUp(), out.dests
	o.dbMu.Lock()
	s.DatabaseUp = o.dbKnown && o.dbDown.IsZero()
	o.dbMu.Unlock()
}

// claimed records one claim.
func (o *observer) claimed(took time.Duration, rows int, err error) {
	o.database(err, "claims")
	if o.m != nil {
		o.m.Claimed(took, rows, err)
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
			if o.m != nil {
				o.m.Confirmed(now.Sub(created[i]))
			}
		}
	}
	if o.m != nil {
		o.m.PublishRound(now.Sub(start))
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
	if o.m != nil {
		o.m.BatchStarted()
	}
}

func (o *observer) batchDone(err error) {
	if o.m != nil {
		o.m.BatchDone(err != nil)
	}
}

// wait waits d (PollInterval, or an idle relay's longer back-off), a
// wake-up, or the end of one of this relay's batches (ended; nil when none
// is in flight), counting which one ended the wait and returning it; ok is
// false when ctx ended.
func (r *Relay) wait(ctx context.Context, d time.Duration, ended <-chan struct{}) (by WakeSource, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", false
	case <-t.C:
		by = WokeByPoll
	case <-r.cfg.Wakeup:
		by = WokeByListen
	case <-ended:
		by = WokeByBatch
	}
	if r.obs.m != nil {
		r.obs.m.Woke(by)
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
		o.sampleHorizon(ctx)
		o.releaseHeld(ctx)
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
	o.sampleErr = err
	if err != nil {
		o.r.log.Debug("sampling the backlog failed", "err", err)
	} else {
		o.backlog, o.sampledAt = b, time.Now()
	}
	o.lastReady = o.readyLocked()
	o.mu.Unlock()
	// Outside o.mu: the hook may read the state.
	if o.m != nil {
		o.m.BacklogSampled(err)
	}
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
