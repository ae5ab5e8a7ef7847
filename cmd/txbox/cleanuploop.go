package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
)

// cleanupLoop is `txbox relay --cleanup-every`: the relay runs what `txbox
// cleanup` does on a schedule. Every relay of a table runs the loop, and
// the store's cleanup lock (store.CleanupLocker) lets one of them clean at
// a time; the others skip that turn. A failed run is logged and counted,
// and the next turn tries again: cleanup never stops delivery.
type cleanupLoop struct {
	every     time.Duration
	olderThan time.Duration // SENT outbox rows
	inboxKeep time.Duration // processed inbox rows; 0: the inbox is left alone
	log       *slog.Logger
	m         *cleanupMetrics // nil without /metrics
}

// cleanupFlags are the relay's flags of the loop.
type cleanupFlags struct {
	every, olderThan, inboxKeep time.Duration
}

func (f *cleanupFlags) add(fs interface {
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) {
	fs.DurationVar(&f.every, "cleanup-every", 0, "run cleanup (as `txbox cleanup` does) this often, one relay of the table at a time (a lock in the database); 0: never")
	fs.DurationVar(&f.olderThan, "cleanup-older-than", 7*24*time.Hour, "with --cleanup-every: age of SENT outbox rows to delete")
	fs.DurationVar(&f.inboxKeep, "cleanup-inbox-retention", 0, "with --cleanup-every: age of processed inbox rows to delete, at least the inbox's retention floor for consumers with default settings (7 days); 0: leave the inbox alone (`txbox cleanup` takes the consumers' own settings)")
}

// check refuses settings the loop could not run with, naming the flag.
func (f cleanupFlags) check(s store.Store) error {
	switch {
	case f.every < 0:
		return &txbox.ConfigError{Field: flagField("cleanup-every"), Reason: "must not be negative"}
	case f.every == 0:
		return nil
	case f.every < time.Second:
		return &txbox.ConfigError{Field: flagField("cleanup-every"), Reason: f.every.String() + " is below 1s"}
	case f.olderThan <= 0:
		return &txbox.ConfigError{Field: flagField("cleanup-older-than"), Reason: "must be positive"}
	case f.inboxKeep < 0:
		return &txbox.ConfigError{Field: flagField("cleanup-inbox-retention"), Reason: "must not be negative"}
	}
	if f.inboxKeep > 0 {
		ret := inbox.Retention{Keep: f.inboxKeep, RetryWindow: inbox.Config{}.RetryWindow(), ManualWindow: inbox.DefaultManualWindow}
		if err := ret.Validate(); err != nil {
			return &txbox.ConfigError{Field: flagField("cleanup-inbox-retention"), Reason: err.Error()}
		}
	}
	if s == nil {
		return nil
	}
	if _, ok := s.(store.CleanupLocker); !ok {
		return &txbox.ConfigError{Field: flagField("cleanup-every"), Reason: "this store cannot keep cleanups to one relay at a time"}
	}
	return nil
}

// run runs a cleanup a minute after the start (or one interval, if
// shorter), give or take a tenth, then every interval, until ctx ends.
func (c cleanupLoop) run(ctx context.Context, s store.Store) {
	if c.m != nil {
		c.m.interval.Set(c.every.Seconds())
	}
	first := min(time.Minute, c.every)
	wait := first - first/10 + rand.N(first/5+1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		c.once(ctx, s)
		wait = c.every
	}
}

// once takes the lock and cleans, or skips the turn when another relay
// holds it.
func (c cleanupLoop) once(ctx context.Context, s store.Store) {
	l, ok, err := s.(store.CleanupLocker).LockCleanup(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return // stopping
	case err != nil:
		c.done("failed", 0, 0, err)
		return
	case !ok:
		c.log.Debug("cleanup: another relay holds the cleanup lock, skipping this turn")
		c.done("skipped", 0, 0, nil)
		return
	}
	defer l.Unlock()
	start := time.Now()
	sent, err := store.Cleanup(ctx, l, c.olderThan, store.DefaultCleanupBatch)
	var processed int64
	if err == nil && c.inboxKeep > 0 {
		processed, err = store.InboxCleanup(ctx, l, c.inboxKeep, store.DefaultCleanupBatch)
	}
	if ctx.Err() != nil {
		return // stopping: the relay's own stop line says so
	}
	if err != nil {
		c.done("failed", sent, processed, err)
		return
	}
	c.log.Info("cleanup done", "outbox_deleted", sent, "inbox_deleted", processed, "took", time.Since(start).Round(time.Millisecond))
	c.done("done", sent, processed, nil)
}

func (c cleanupLoop) done(result string, sent, processed int64, err error) {
	if err != nil {
		c.log.Warn("cleanup failed; trying again at the next turn", "err", err, "outbox_deleted", sent, "inbox_deleted", processed, "next_in", c.every)
	}
	if c.m == nil {
		return
	}
	c.m.runs.WithLabelValues(result).Inc()
	c.m.deleted.WithLabelValues("outbox").Add(float64(sent))
	c.m.deleted.WithLabelValues("inbox").Add(float64(processed))
	if result == "done" {
		c.m.lastSuccess.SetToCurrentTime()
	}
}

// cleanupMetrics are the loop's series (METRICS.md, "Cleanup").
type cleanupMetrics struct {
	runs        *prometheus.CounterVec
	deleted     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	interval    prometheus.Gauge
}

func newCleanupMetrics(reg prometheus.Registerer) *cleanupMetrics {
	m := &cleanupMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txbox_cleanup_runs_total",
			Help: "Turns of --cleanup-every by result: done, skipped (another relay held the cleanup lock), failed."}, []string{"result"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "txbox_cleanup_deleted_rows_total",
			Help: "Rows this relay's cleanups deleted, by table: outbox (SENT rows), inbox (processed rows)."}, []string{"table"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "txbox_cleanup_last_success_timestamp_seconds",
			Help: "Unix time this relay last finished a cleanup; 0: not yet."}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{Name: "txbox_cleanup_interval_seconds",
			Help: "The relay's --cleanup-every."}),
	}
	for _, r := range []string{"done", "skipped", "failed"} {
		m.runs.WithLabelValues(r)
	}
	for _, t := range []string{"outbox", "inbox"} {
		m.deleted.WithLabelValues(t)
	}
	reg.MustRegister(m.runs, m.deleted, m.lastSuccess, m.interval)
	return m
}
