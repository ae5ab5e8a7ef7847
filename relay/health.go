package relay

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotReady is what Ready returns, wrapped with the reason, when the relay
// should not count as serving.
var ErrNotReady = errors.New("relay: not ready")

// Alive reports whether the claim loop is going round: it fails once the
// loop has not come back for longer than the longest legitimate wait (a
// lease's worth of publishing plus an idle relay's longest wait,
// IdlePollMax, twice over).
func (r *Relay) Alive() error {
	limit := 2 * (r.cfg.Lease + r.cfg.IdlePollMax)
	if since := time.Since(time.Unix(0, r.obs.beat.Load())); since > limit {
		return fmt.Errorf("relay: claim loop stuck for %v (limit %v)", since.Round(time.Millisecond), limit)
	}
	return nil
}

// Ready samples the backlog now and reports whether the relay is serving:
// the database answers, the broker takes publishes (no outage of the
// broker or of a destination: outage.go), the oldest pending row is
// younger than MaxPendingAge, and, while a backlog exists, something was
// published within StallAfter. The error wraps ErrNotReady and names
// the first failed check.
func (r *Relay) Ready(ctx context.Context) error {
	r.obs.sample(ctx)
	r.obs.mu.Lock()
	defer r.obs.mu.Unlock()
	return r.obs.lastReady
}

// readyLocked evaluates readiness from the last sample; o.mu is held.
func (o *observer) readyLocked() error {
	cfg := o.r.cfg
	notReady := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrNotReady, fmt.Sprintf(format, a...))
	}
	if o.sampleErr != nil {
		return notReady("database: %v", o.sampleErr)
	}
	o.dbMu.Lock()
	dbDown, dbErr := o.dbDown, o.dbErr
	o.dbMu.Unlock()
	if !dbDown.IsZero() {
		return notReady("database: unavailable for %v: %v", time.Since(dbDown).Round(time.Second), dbErr)
	}
	switch st := o.r.out.state(); {
	case !st.brokerSince.IsZero():
		return notReady("broker: outage for %v, publishing paused, events keep their attempts (next probe in %v): %v",
			time.Since(st.brokerSince).Round(time.Second), max(time.Until(st.nextProbe), 0).Round(time.Second), st.brokerCause)
	case !st.known:
		return notReady("broker: not reached yet")
	case st.dests > 0:
		return notReady("broker: %d destination(s) refuse publishes, their events wait (topic %q for %v): %v",
			st.dests, st.destTopic, time.Since(st.destSince).Round(time.Second), st.destCause)
	}
	if cfg.MaxPendingAge > 0 && o.backlog.OldestAge > cfg.MaxPendingAge {
		return notReady("oldest pending event is %v old (max %v)", o.backlog.OldestAge.Round(time.Second), cfg.MaxPendingAge)
	}
	if cfg.StallAfter > 0 && o.backlog.Unsent() > 0 {
		last := o.started
		if p := o.lastPublish.Load(); p > 0 {
			last = time.Unix(0, p)
		}
		if since := time.Since(last); since > cfg.StallAfter {
			return notReady("stalled: %d rows waiting and nothing published for %v (stall after %v)", o.backlog.Unsent(), since.Round(time.Second), cfg.StallAfter)
		}
	}
	return nil
}
