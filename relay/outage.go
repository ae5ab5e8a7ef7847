package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/backoff"
)

// A failure of the way out (the broker unreachable, no confirmation in
// time, no stream for a subject, not authorised, a stream full) is not the
// event's: it spends none of the event's attempts and never makes it DEAD,
// however long it lasts. The row goes back to RETRY with its retry_count as
// it was (store.Failure.Outage), which holds back the later rows of its
// aggregate, so order is kept through the outage.
//
// An outage has one of two scopes:
//   - the broker: a publish round that confirmed nothing and failed at
//     least one message with an outage (or a ping of an idle relay that
//     failed). The claim loop stops claiming, so a broker that is away for
//     an hour costs a probe per interval, not a claim and a failed publish
//     per poll; the interval doubles from BackoffBase up to OutageProbeMax.
//     A probe pings a broker.Pinger, and once that answers (or for a
//     publisher that cannot be pinged) claims: that claim's publish round
//     is the real test. The first confirmation ends the outage. Rows put
//     back meanwhile are due again after BackoffBase, so the probe's claim
//     finds them.
//   - a destination: in a round that confirmed something, the topics whose
//     messages failed with an outage (a stream deleted under a running
//     relay). The other topics flow; that topic's rows come back after its
//     own probe interval, growing as the broker's does, until one of them
//     is confirmed.
//
// Each outage logs one line when it starts and one when it ends, with how
// long it lasted, how many events it put back (events_deferred: the lane
// heads whose publish failed) and the backlog that waited (backlog: the
// last sample of unsent rows); meanwhile the metrics and /readyz show it.
type outages struct {
	log       *slog.Logger
	base, max time.Duration
	// backlog is the relay's last sampled count of unsent rows: the events
	// that waited, for the line that ends an outage; nil: not sampled.
	backlog func() int64

	mu sync.Mutex
	// known: the broker's state has been seen (a publish round or a ping);
	// before that the broker does not count as up.
	known   bool
	broker  spell
	pinged  bool      // the broker outage began with a failed ping, so a ping may end it
	probeAt time.Time // a paused claim loop probes no sooner
	over    chan struct{}
	dests   map[string]*spell
}

// spell is one outage: of the broker, or of one destination.
type spell struct {
	since time.Time // zero: no outage
	n     int       // failures in a row; the probe interval is backoff.Delay(n, base, max)
	cause error
	held  map[string]struct{} // ids of the events whose publish failed with it
}

// heldCap bounds the ids an outage remembers; past it the count says "at
// least".
const heldCap = 1 << 20

func newOutages(log *slog.Logger, base, max time.Duration, known bool) *outages {
	return &outages{log: log, base: min(base, max), max: max, known: known, over: make(chan struct{}), dests: map[string]*spell{}}
}

// isOutage reports whether a publish error is a failure of the way out.
// A deadline that passed while waiting for the broker's confirmation is one
// too, whoever wrapped it.
func isOutage(err error) bool {
	return txbox.IsOutage(err) || errors.Is(err, context.DeadlineExceeded)
}

// round records one publish round's results.
func (o *outages) round(msgs []broker.Message, errs []error) {
	ok, all := false, true
	for _, err := range errs {
		if err == nil {
			ok = true
		} else {
			all = false
		}
	}
	if all {
		// The common round: everything confirmed. Only an outage in
		// progress needs the bookkeeping below.
		o.mu.Lock()
		o.known = true
		quiet := !o.downLocked() && len(o.dests) == 0
		o.mu.Unlock()
		if quiet {
			return
		}
	}
	type end struct {
		topic string
		s     spell
	}
	var ended []end
	var began []string
	o.mu.Lock()
	o.known = true
	now := time.Now()
	if ok && o.downLocked() {
		ended = append(ended, end{"", o.broker})
		o.broker, o.pinged = spell{}, false
		close(o.over)
		o.over = make(chan struct{})
	}
	failed := map[string]bool{}
	confirmed := map[string]bool{}
	outaged := false
	for i, err := range errs {
		m := &msgs[i]
		switch {
		case err == nil:
			confirmed[m.Topic] = true
		case !isOutage(err):
		case !ok && o.dests[m.Topic] == nil:
			// Nothing confirmed, and the topic was not known to be out on
			// its own: the broker is.
			outaged = true
			if o.broker.start(now, err) {
				began = append(began, "")
				o.pinged = false
			}
			o.broker.hold(m.Event.ID)
		default:
			d := o.dests[m.Topic]
			if d == nil {
				d = &spell{}
				o.dests[m.Topic] = d
			}
			if !failed[m.Topic] {
				failed[m.Topic] = true
				if d.start(now, err) {
					began = append(began, m.Topic)
				}
				d.n++
			}
			d.hold(m.Event.ID)
		}
	}
	if outaged {
		o.broker.n++
		o.probeAt = now.Add(backoff.Delay(o.broker.n, o.base, o.max))
	}
	for topic := range confirmed {
		if d := o.dests[topic]; d != nil && !failed[topic] {
			ended = append(ended, end{topic, *d})
			delete(o.dests, topic)
		}
	}
	probeIn := time.Until(o.probeAt)
	o.mu.Unlock()
	for _, t := range began {
		if t == "" {
			o.log.Warn("broker outage: publishing paused, events keep their attempts", "cause", o.cause(""), "probe_in", probeIn.Round(time.Millisecond))
		} else {
			o.log.Warn("destination refuses publishes: its events wait, keeping their attempts; other destinations flow", "topic", t, "cause", o.cause(t))
		}
	}
	for _, e := range ended {
		o.logEnd(e.topic, e.s, now)
	}
}

func (o *outages) cause(topic string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if topic == "" {
		return o.broker.cause
	}
	if d := o.dests[topic]; d != nil {
		return d.cause
	}
	return nil
}

func (o *outages) logEnd(topic string, s spell, now time.Time) {
	held := len(s.held)
	attrs := []any{"lasted", now.Sub(s.since).Round(time.Millisecond).String(), "events_deferred", held}
	if held >= heldCap {
		attrs = append(attrs, "events_deferred_at_least", true)
	}
	if o.backlog != nil {
		attrs = append(attrs, "backlog", o.backlog())
	}
	if topic == "" {
		o.log.Info("broker outage over: publishing resumed", attrs...)
	} else {
		o.log.Info("destination takes publishes again", append([]any{"topic", topic}, attrs...)...)
	}
}

// start begins the spell if none is running and reports whether it did.
func (s *spell) start(now time.Time, cause error) bool {
	s.cause = cause
	if !s.since.IsZero() {
		return false
	}
	s.since, s.n, s.held = now, 0, map[string]struct{}{}
	return true
}

func (s *spell) hold(id string) {
	if len(s.held) < heldCap {
		s.held[id] = struct{}{}
	}
}

func (o *outages) downLocked() bool { return !o.broker.since.IsZero() }

// deferFor is how long an event that failed with an outage waits before it
// may be claimed again: BackoffBase while the whole broker is out (the
// paused claim loop is what spaces the probes), else its destination's
// probe interval. round has already counted the failure.
func (o *outages) deferFor(topic string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d := o.dests[topic]; d != nil && !o.downLocked() {
		return backoff.Delay(d.n, o.base, o.max)
	}
	return o.base
}

// pause is what the claim loop must wait before its next claim: zero when
// the broker is not out, else the time to the next probe, and a channel
// closed when the outage ends before that.
func (o *outages) pause() (time.Duration, <-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.downLocked() {
		return 0, nil, false
	}
	return time.Until(o.probeAt), o.over, true
}

// probed records a probe: err from a ping, nil when the ping answered or
// the publisher cannot be pinged (then the claim after it is the probe).
// Either way the next probe is one interval away; a ping that answers ends
// an outage that a failed ping began.
func (o *outages) probed(err error) {
	o.ping(err, true)
}

// ping records a ping of an idle relay's broker (probe false) or of a
// paused claim loop (probe true).
func (o *outages) ping(err error, probe bool) {
	now := time.Now()
	o.mu.Lock()
	o.known = true
	var ended *spell
	switch {
	case err != nil:
		began := o.broker.start(now, err)
		if began {
			o.pinged = true
		}
		o.broker.n++
		o.probeAt = now.Add(backoff.Delay(o.broker.n, o.base, o.max))
		probeIn := time.Until(o.probeAt)
		o.mu.Unlock()
		if began {
			o.log.Warn("broker outage: it does not answer; publishing paused", "cause", err, "probe_in", probeIn.Round(time.Millisecond))
		}
		return
	case o.downLocked() && o.pinged:
		s := o.broker
		ended = &s
		o.broker, o.pinged = spell{}, false
		close(o.over)
		o.over = make(chan struct{})
	case o.downLocked() && probe:
		o.probeAt = now.Add(backoff.Delay(o.broker.n, o.base, o.max))
	}
	o.mu.Unlock()
	if ended != nil {
		o.logEnd("", *ended, now)
	}
}

// outageState is what the metrics and readiness show.
type outageState struct {
	known       bool
	brokerSince time.Time // zero: the broker is not out
	brokerCause error
	nextProbe   time.Time
	dests       int // destinations out while the broker is not
	destTopic   string
	destSince   time.Time
	destCause   error
}

func (o *outages) state() outageState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := outageState{known: o.known, brokerSince: o.broker.since, brokerCause: o.broker.cause, nextProbe: o.probeAt, dests: len(o.dests)}
	for t, d := range o.dests {
		if st.destSince.IsZero() || d.since.Before(st.destSince) {
			st.destTopic, st.destSince, st.destCause = t, d.since, d.cause
		}
	}
	return st
}

func (s outageState) brokerUp() bool { return s.known && s.brokerSince.IsZero() }

// awaitProbe holds the claim loop while the broker is out: until the next
// probe, then a ping where the publisher can be pinged; it returns once a
// claim may run (the outage ended, or the probe lets one claim test the
// broker), or false when ctx ended.
func (r *Relay) awaitProbe(ctx context.Context) bool {
	for {
		wait, over, down := r.out.pause()
		if !down {
			return true
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-over:
			case <-t.C:
			}
			t.Stop()
			r.obs.beat.Store(time.Now().UnixNano())
			continue
		}
		var err error
		if r.obs.pinger != nil {
			pctx, cancel := context.WithTimeout(ctx, min(r.cfg.PublishTimeout, 5*time.Second))
			err = r.obs.pinger.Ping(pctx)
			cancel()
			if ctx.Err() != nil {
				return false
			}
		}
		r.out.probed(err)
		if err == nil {
			return true
		}
	}
}
