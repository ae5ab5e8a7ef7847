// Package relay delivers outbox rows to a broker at least once, in
// per-aggregate order: claim -> publish -> mark.
//
// The publish loop: rows of one claim are grouped into lanes
// by aggregate; each round publishes the head of every lane in one pipelined
// call (with a publisher that declares broker.OrderedPipeliner, a run of
// each lane's events: see runLen); a lane moves on only after its head is
// confirmed, so a later event of an aggregate is never sent while an earlier
// one is unsent. A retryable
// failure parks its lane (the row goes to RETRY, the rest of the lane is
// released) and the other lanes go on. Rows are marked SENT only after the
// broker confirmed them; a crash in between re-publishes them, which the
// consumer's inbox absorbs. How rows are claimed and their outcome recorded
// is the claim mode's (claimer.go); with a store that chains claims
// (claimapi.ChainClaimer) one aggregate can be in several batches at once, and
// chain.go keeps their order.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/backoff"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/telemetry"
)

// Relay runs the delivery loop. Create it with New and run it with Run.
type Relay struct {
	cfg     Config
	claimer claimer
	log     *slog.Logger
	ctrs    counters
	obs     *observer
	out     *outages // outages of the way out (outage.go)
	// tracer is nil when tracing is off: no per-message tracing work.
	tracer telemetry.Tracer

	pipelined bool // the publisher keeps per-key order with many in flight

	// blocks is Config.DeadBlocks; blocker the store's side of it, nil
	// for a store that cannot hold rows (deadblock.go).
	blocks  deadBlocks
	blocker store.DeadBlocker
}

// New validates cfg and returns a relay.
func New(cfg Config) (*Relay, error) {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg, log: cfg.Logger.With("relay", cfg.ID), pipelined: broker.PipelinesPerKey(cfg.Publisher)}
	r.claimer = newClaimer(r)
	r.blocks = newDeadBlocks(cfg.DeadBlocks)
	r.blocker, _ = cfg.Store.(store.DeadBlocker)
	if r.blocks.on() && r.blocker == nil {
		return nil, &txbox.ConfigError{Field: "DeadBlocks", Reason: fmt.Sprintf("the store (%T) cannot hold events behind a DEAD one (store.DeadBlocker)", cfg.Store)}
	}
	_, pingable := cfg.Publisher.(broker.Pinger)
	// A publisher that cannot be pinged was connected when it was handed
	// over; one that can is up once its first ping answers.
	r.out = newOutages(r.log, cfg.BackoffBase, cfg.OutageProbeMax, !pingable)
	r.obs = newObserver(r)
	if cfg.Metrics != nil {
		cfg.Metrics.Attach(r.Stats)
	}
	r.tracer = cfg.Tracer
	return r, nil
}

// Run delivers until ctx is cancelled. On cancellation the batches in
// flight finish their publish round and release the rest, then Run returns
// nil.
//
// Claims run one at a time on this goroutine; up to Workers claimed batches
// are published and marked concurrently. That is safe for order because a
// claim never takes rows of an aggregate whose earlier row is leased or
// held, except behind this relay's own batches in flight with a store that
// chains claims, and then chain.go keeps the order between the batches.
func (r *Relay) Run(ctx context.Context) error {
	r.log.Info("relay started", "claims", r.claimer.kind(), "batch", r.cfg.BatchSize, "workers", r.cfg.Workers, "poll", r.cfg.PollInterval, "idle_poll_max", r.cfg.IdlePollMax, "lease", r.cfg.Lease, "topic", string(r.cfg.Topic))
	logDeadBlocks(r.log, r.blocks)
	defer func() {
		c := &r.ctrs
		r.log.Info("relay stopped", "published", c.Published.Load(), "dead_marked", c.Dead.Load(), "retried", c.Retried.Load(), "deferred", c.Deferred.Load(),
			"claim_time", time.Duration(c.ClaimNanos.Load()), "publish_time", time.Duration(c.PublishNanos.Load()),
			"mark_time", time.Duration(c.MarkNanos.Load()))
	}()
	// Leaving waits for this relay's batches (deferred before wg.Wait, so
	// it runs after it).
	defer r.claimer.join(ctx)()
	slots := make(chan struct{}, r.cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	var fl flight
	// Batches run on a context that shutdown does not cancel, so rows
	// already claimed are finished or released, never abandoned.
	work := context.WithoutCancel(ctx)
	watchCtx, stopWatch := context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); r.obs.watch(watchCtx) }()
	defer stopWatch()
	errDelay := r.cfg.PollInterval
	// idle is the next idle wait: PollInterval, doubled after each idle
	// wait that ran its course, up to IdlePollMax (waitAfterShortClaim).
	idle := r.cfg.PollInterval
	for {
		r.obs.beat.Store(time.Now().UnixNano())
		if !r.awaitProbe(ctx) {
			return nil
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if ctx.Err() != nil {
			<-slots
			return nil
		}
		_, endsBefore, _ := fl.state()
		b, err := r.claim(work)
		if err != nil {
			<-slots
			r.ctrs.Errors.Add(1)
			if !sleep(ctx, errDelay, nil, nil) {
				return nil
			}
			errDelay = min(errDelay*2, 30*time.Second)
			continue
		}
		errDelay = r.cfg.PollInterval
		if len(b.recs) > 0 {
			idle = r.cfg.PollInterval
		}
		if len(b.recs) == 0 {
			<-slots
		} else {
			fl.start()
			wg.Add(1)
			r.obs.batchStarted()
			go func() {
				defer wg.Done()
				defer fl.end()
				defer func() { <-slots }()
				defer b.c.close()
				err := r.deliver(work, b, ctx.Done())
				r.obs.batchDone(err)
				if err != nil {
					r.ctrs.Errors.Add(1)
					r.log.Warn("marking a batch failed; its rows will be delivered again (lease claims: once their leases expire)", "err", err)
				}
			}()
		}
		if len(b.recs) == r.cfg.BatchSize {
			continue
		}
		if !r.waitAfterShortClaim(ctx, &fl, endsBefore, &idle, b.took) {
			return nil
		}
	}
}

// Observe samples the backlog, pings an idle relay's broker, and keeps the
// metrics, readiness and progress log current, every MetricsInterval until
// ctx ends. Run does this itself; a caller that publishes through
// DeliverOrdered instead (a change data capture reader) runs Observe
// beside it.
func (r *Relay) Observe(ctx context.Context) { r.obs.watch(ctx) }

// waitAfterShortClaim decides what a claim that came back short waits for.
// Short means the table holds nothing more that this relay may take now,
// but the rows held back may be the later rows of aggregates whose earlier
// rows this relay's own batches have in flight: those become claimable the
// moment such a batch ends, so the relay waits for that signal rather than
// a poll interval. If a batch already ended while the claim ran, it claims
// again at once; only with nothing of its own in flight is it idle.
//
// The in-flight count, the number of ends and the next-end channel are read
// together under one lock: a batch that ends after that read closes the
// channel read, one that ended before it changed the count of ends, so no
// end is missed. The wait is still bounded by the poll interval, for rows
// that other relays or producers without a wake-up make claimable.
//
// An idle relay backs off: *idle, its next idle wait, doubles after each
// idle wait that ran its full time, up to IdlePollMax, and goes back to
// PollInterval on a wake-up, a batch end or a claim that finds rows (Run).
// A relay with work in flight never backs off.
//
// The poll interval runs from the start of the short claim, not its end
// (afterPoll): the claim saw every row committed before its snapshot, so a
// row committed just after it waits one interval for the next claim, not
// an interval plus the claim's own time.
func (r *Relay) waitAfterShortClaim(ctx context.Context, fl *flight, endsBefore uint64, idle *time.Duration, claimTook time.Duration) bool {
	n, ends, next := fl.state()
	switch {
	case ends != endsBefore:
		*idle = r.cfg.PollInterval
		return true
	case n > 0:
		r.ctrs.BatchWaits.Add(1)
		*idle = r.cfg.PollInterval
		_, ok := r.wait(ctx, afterPoll(r.cfg.PollInterval, claimTook), next)
		return ok
	default:
		r.ctrs.IdleWaits.Add(1)
		woke, ok := r.wait(ctx, afterPoll(*idle, claimTook), nil)
		if woke == WokeByPoll {
			*idle = min(*idle*2, r.cfg.IdlePollMax)
		} else {
			*idle = r.cfg.PollInterval
		}
		return ok
	}
}

// afterPoll is what is left of a poll wait of d once the claim before it
// took claimTook, but never under half of d: a claim slower than its
// interval (a table bloated by an operator's mistake) must not turn an
// idle relay into one that claims back to back.
func afterPoll(d, claimTook time.Duration) time.Duration {
	return max(d-claimTook, d/2)
}

// sleep waits d, a wake-up, the end of a batch, or ctx; it returns false
// when ctx ended.
func sleep(ctx context.Context, d time.Duration, wake, ended <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	case <-ended:
	}
	return true
}

// batch is one claim: the mode's side of it, its rows, and the time past
// which it must not publish.
type batch struct {
	c        claimed
	recs     []store.Record
	deadline time.Time
	took     time.Duration // the claim's own time, which the poll wait after it counts (afterPoll)
}

func (r *Relay) claim(ctx context.Context) (batch, error) {
	claimedAt := time.Now()
	c, err := r.claimer.claim(ctx, r.cfg.BatchSize)
	b := batch{c: c, took: time.Since(claimedAt)}
	if err == nil {
		b.recs = c.records()
	}
	r.ctrs.ClaimNanos.Add(int64(b.took))
	r.obs.claimed(b.took, len(b.recs), err)
	if err != nil {
		return b, err
	}
	r.ctrs.LastClaim.Store(time.Now().UnixNano())
	r.ctrs.Claimed.Add(int64(len(b.recs)))
	// Publishing stops well before the lease ends: past it another relay may
	// own these rows, and publishing them too would break the guarantee that
	// a row is published by one relay at a time. (A transaction's claim holds
	// its rows for as long as it is open; the deadline bounds how long.)
	b.deadline = claimedAt.Add(r.cfg.Lease - r.cfg.PublishTimeout/2)
	return b, nil
}

type item struct {
	rec store.Record
	msg broker.Message
}

// outcome collects the marks of one batch so each kind is one statement.
type outcome struct {
	sent     []int64
	failures []store.Failure
	release  []int64
}

// deliver publishes one batch in rounds and marks the outcome; once stop is
// closed, the round in flight finishes and the rest is released at once, so
// a SIGTERM does not wait for a deep lane to drain.
func (r *Relay) deliver(ctx context.Context, b batch, stop <-chan struct{}) error {
	var out outcome
	lanes, order := r.lanes(b.recs, &out)
	deadline := b.deadline
	b.c.trim(lanes, &out)
	release := func(k string) int {
		n := len(lanes[k])
		for _, it := range lanes[k] {
			out.release = append(out.release, it.rec.ID)
		}
		lanes[k] = nil
		b.c.laneDone(k, false)
		return n
	}
	order = r.gate(ctx, b.c, lanes, r.live(order, lanes), &out, release)
	releaseRest := func(why string) {
		n := 0
		for _, k := range order {
			n += release(k)
		}
		r.log.Info("releasing the rest of the batch", "why", why, "rows", n)
	}
	for len(order) > 0 {
		if time.Until(deadline) < r.cfg.PublishTimeout/4 {
			releaseRest("lease nearly spent")
			break
		}
		if stopped(stop) {
			releaseRest("shutting down")
			break
		}
		ready, waitFor := b.c.ready(order, release)
		if len(ready) == 0 {
			if waitFor == nil {
				break // every lane left was released
			}
			r.ctrs.ChainWaits.Add(1)
			waitChain(waitFor, stop, time.Until(deadline)-r.cfg.PublishTimeout/4)
			order = r.live(order, lanes)
			continue
		}
		// One run per lane: its head, or with a publisher that keeps per-key
		// order in flight, its next same-topic events.
		runs := make([]int, len(ready))
		// Head-only rounds send one message per lane; pipelined runs grow
		// from there.
		msgs := make([]broker.Message, 0, len(ready))
		created := make([]time.Time, 0, len(ready))
		for i, k := range ready {
			runs[i] = r.runLen(lanes[k])
			for _, it := range lanes[k][:runs[i]] {
				msgs = append(msgs, it.msg)
				created = append(created, it.rec.CreatedAt)
			}
		}
		errs := r.publishRound(ctx, deadline, msgs, created)
		at := 0
		for i, k := range ready {
			n := runs[i]
			rest, parked := r.settleRun(lanes[k], n, errs[at:at+n], &out)
			lanes[k] = rest
			at += n
			if len(rest) == 0 {
				b.c.laneDone(k, !parked)
			}
		}
		order = r.live(order, lanes)
	}
	markStart := time.Now()
	defer func() { r.ctrs.MarkNanos.Add(int64(time.Since(markStart))) }()
	return b.c.finish(ctx, &out)
}

// live keeps the lanes of order that still have events, in order.
func (r *Relay) live(order []string, lanes map[string][]item) []string {
	next := order[:0]
	for _, k := range order {
		if len(lanes[k]) > 0 {
			next = append(next, k)
		}
	}
	return next
}

// lanes groups rows by aggregate, keeping id order inside each lane. Rows
// that cannot be turned into a message go straight to DEAD.
func (r *Relay) lanes(recs []store.Record, out *outcome) (map[string][]item, []string) {
	lanes := make(map[string][]item, len(recs))
	var order []string
	for _, rec := range recs {
		it, err := r.item(rec)
		if err != nil {
			out.failures = append(out.failures, r.failure(rec, txbox.Permanent(err), ""))
			continue
		}
		k := laneKey(rec)
		if _, ok := lanes[k]; !ok {
			order = append(order, k)
		}
		lanes[k] = append(lanes[k], it)
	}
	return lanes, order
}

// item builds the broker message of a row: the one place a record becomes
// what goes on the wire, for the polling loop and for DeliverOrdered.
func (r *Relay) item(rec store.Record) (item, error) {
	ev, err := rec.Event()
	if err != nil {
		return item{}, err
	}
	return item{rec: rec, msg: broker.Message{Event: ev, Topic: r.cfg.Topic.Render(ev), Source: r.cfg.Source}}, nil
}

// laneKey is a record's aggregate: the unit of order.
func laneKey(rec store.Record) string { return aggKey(rec.AggregateType, rec.AggregateID) }

func aggKey(aggType, aggID string) string { return aggType + "\x00" + aggID }

// failure is the outcome of a row whose publish failed with err, by whose
// fault: a failure of the event itself (ErrPermanent: DEAD at once; any
// other error: an attempt spent, DEAD after MaxAttempts), or of the way out
// (outage.go), which spends no attempt and never makes the row DEAD: it
// goes back to RETRY with its retry_count as it was, after topic's probe
// interval. Rows that never reached the broker (they cannot become a
// message) pass an empty topic and a permanent error.
func (r *Relay) failure(rec store.Record, err error, topic string) store.Failure {
	attempt := rec.RetryCount + 1
	f := store.Failure{ID: rec.ID, Error: err.Error()}
	switch {
	case errors.Is(err, txbox.ErrPermanent):
		f.Dead = true
		f.Error = "permanent: " + f.Error
	case isOutage(err):
		f.Outage = true
		f.Delay = r.out.deferFor(topic)
		r.log.Debug("publish failed for an outage, will retry without spending an attempt", eventAttrs(rec, "attempts_spent", rec.RetryCount, "delay", f.Delay, "err", err)...)
		return f
	case attempt >= r.cfg.MaxAttempts:
		f.Dead = true
		f.Error = fmt.Sprintf("gave up after %d attempts: %s", attempt, f.Error)
	default:
		f.Delay = backoff.Delay(attempt, r.cfg.BackoffBase, r.cfg.BackoffMax)
	}
	if f.Dead {
		r.log.Warn("event is DEAD", eventAttrs(rec, "attempt", attempt, "err", f.Error)...)
	} else {
		r.log.Debug("publish failed, will retry", eventAttrs(rec, "attempt", attempt, "delay", f.Delay, "err", err)...)
	}
	return f
}

// countFailures counts recorded failures by what they did to their rows.
func (r *Relay) countFailures(fs []store.Failure) {
	for _, f := range fs {
		switch {
		case f.Dead:
			r.ctrs.Dead.Add(1)
		case isHold(f):
			r.ctrs.Held.Add(1)
		case f.Outage:
			r.ctrs.Deferred.Add(1)
		default:
			r.ctrs.Retried.Add(1)
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// miscounted stands in for the results of a publisher that returned a
// number of them different from the messages it was given: which ones the
// broker has is unknown, so every message of the round counts as a
// retryable failure. The batch still goes through its marks, so its claim
// (a transaction's connection and row locks, or a lease) is released.
func miscounted(log *slog.Logger, got, want int) []error {
	err := fmt.Errorf("relay: publisher returned %d results for %d messages", got, want)
	log.Error("publisher bug: treating the round as failed", "err", err)
	errs := make([]error, want)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
