package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/backoff"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// What `txbox relay` does before the relay exists.
//
// A relay started before its database or its broker (a deploy, a restart of
// both) waits for them rather than exiting: a process that exits is
// restarted by its supervisor again and again, with a back-off that can
// outlast the outage, and while it is down it exports nothing, so no alert
// says why. Both are waited for in the same way, at the same time: tries
// spaced from --backoff-base doubling up to --outage-probe-max, one log line
// when a wait starts and one when it ends, and meanwhile /metrics shows
// txbox_relay_ready, txbox_relay_database_up and txbox_relay_broker_up at 0,
// /readyz answers 503 with the reason and /healthz 200 (the process does
// what it should; restarting it would not help). With --fail-fast the first
// failure exits 1 instead, naming the setting. Either way a configuration
// error (a bad URL, an unknown scheme, an unmigrated database) exits 2 at
// once.
//
// A SQLite database is a file, with nothing to wait for: failing to open it
// exits 1 at once.

// dep is the start-up state of one thing the relay needs: the database or
// the broker.
type dep struct {
	what  string // "database" or "broker", as /readyz and the log name it
	field string // the setting, as an error names it: "--db (TXBOX_DB)"
	url   string // redacted

	mu    sync.Mutex
	up    bool
	since time.Time // the first failed try; zero: none
	err   error     // the last failed try's
}

// failed records a failed try and reports whether it was the first.
func (d *dep) failed(err error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	first := d.since.IsZero()
	if first {
		d.since = time.Now()
	}
	d.err = err
	return first
}

// reached records a try that succeeded and returns how long it was waited
// for (0: the first try).
func (d *dep) reached() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.up = true
	if d.since.IsZero() {
		return 0
	}
	return time.Since(d.since)
}

func (d *dep) isUp() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.up
}

// reason is why d keeps the relay from being ready; "" once reached.
func (d *dep) reason() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.up:
		return ""
	case d.err == nil:
		return d.what + ": not reached yet"
	default:
		return fmt.Sprintf("%s: not reached yet, waiting for %v: %s", d.what, time.Since(d.since).Round(time.Second), oneLine(d.err))
	}
}

// startState is what /readyz, /healthz and /metrics show until the relay
// exists.
type startState struct {
	db, broker dep
}

func newStartState(dbURL, brokerURL string) *startState {
	return &startState{
		db:     dep{what: "database", field: flagField("db"), url: redact.URL(dbURL)},
		broker: dep{what: "broker", field: flagField("broker"), url: redact.URL(brokerURL)},
	}
}

// Alive: a relay waiting for its database or broker is doing its job.
func (s *startState) Alive() error { return nil }

// Ready fails with what is still missing; the relay answers once it exists.
func (s *startState) Ready(context.Context) error {
	var why []string
	for _, d := range []*dep{&s.db, &s.broker} {
		if r := d.reason(); r != "" {
			why = append(why, r)
		}
	}
	if len(why) == 0 {
		why = append(why, "starting")
	}
	return fmt.Errorf("%w: %s", relay.ErrNotReady, strings.Join(why, "; "))
}

// register adds the start-up series: the relay's own gauges of readiness
// and connection state, under the same names and labels, so an alert on
// them fires for a relay that never got as far as creating its relay. The
// relay's collectors replace them (obsServer.start).
func (s *startState) register(reg prometheus.Registerer) {
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	up := func(d *dep) func() float64 {
		return func() float64 {
			if d.isUp() {
				return 1
			}
			return 0
		}
	}
	gauge("txbox_relay_ready", "1 when the relay is ready (see /readyz); 0 while it waits at start for its database or broker.", func() float64 { return 0 })
	gauge("txbox_relay_broker_up", "1 while the broker takes publishes; 0 until the relay reached it.", up(&s.broker))
	gauge("txbox_relay_database_up", "1 while the relay's claims and backlog samples succeed; 0 until the relay reached the database.", up(&s.db))
}

// waitPolicy is how the start-up waits for what is missing.
type waitPolicy struct {
	log       *slog.Logger
	base, max time.Duration // back-off between tries: --backoff-base doubling up to --outage-probe-max
	failFast  bool
}

// errStopped: the process was told to stop while it waited.
var errStopped = errors.New("stopped while waiting at start")

// final marks a failure that waiting cannot fix although it is no
// configuration error: a step after the database answered (the outbox
// check, --migrate) failed.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// reach calls try until it succeeds. A failure that fatal recognises is
// returned at once, and so is any failure with --fail-fast (as a runtime
// error naming the setting); others are tried again after a back-off.
// onWait, if set, is called when the first wait begins.
func reach[T any](ctx context.Context, d *dep, w waitPolicy, try func(context.Context) (T, error), fatal func(error) bool, onWait func()) (T, error) {
	var zero T
	for n := 1; ; n++ {
		v, err := try(ctx)
		if err == nil {
			if waited := d.reached(); waited > 0 {
				w.log.Info(d.what+" reached: the wait at start is over", d.what, d.url, "waited", waited.Round(time.Millisecond).String())
			}
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, errStopped
		}
		if fatal(err) {
			return zero, err
		}
		if w.failFast {
			return zero, &runtimeError{msg: fmt.Sprintf("%s: cannot reach the %s at start, and --fail-fast (TXBOX_FAIL_FAST) is set: %s", d.field, d.what, oneLine(err))}
		}
		delay := backoff.Delay(n, w.base, w.max)
		if d.failed(err) {
			w.log.Warn(d.what+" unreachable at start: waiting for it; the relay starts once it answers (--fail-fast exits instead)",
				d.what, d.url, "err", err, "retry_in", delay.Round(time.Millisecond).String())
			if onWait != nil {
				onWait()
			}
		} else {
			w.log.Debug(d.what+" still unreachable", d.what, d.url, "err", err, "retry_in", delay.Round(time.Millisecond).String())
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, errStopped
		case <-t.C:
		}
	}
}

// connect reaches the database and the broker. The database is tried
// first, alone, so that a configuration error found in opening it (a table
// name, a URL, a missing table) exits before the broker is tried or
// anything is logged about it; once the database has to be waited for, the
// broker is tried meanwhile, so that both waits show at once and the relay
// starts as soon as the later of the two answers. A failure that ends one
// wait for good ends the other.
func (g *globals) connect(ctx context.Context, st *startState, w waitPolicy, migrate bool) (store.Store, broker.Publisher, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type opened struct {
		s   store.Store
		err error
	}
	dbc := make(chan opened, 1)
	waiting := make(chan struct{})
	go func() {
		s, err := reach(ctx, &st.db, w, func(ctx context.Context) (store.Store, error) {
			return g.openRelayStore(ctx, migrate)
		}, g.dbFatal, func() { close(waiting) })
		if err != nil {
			cancel()
		}
		dbc <- opened{s, err}
	}()
	var db opened
	dbDone := false
	select {
	case db = <-dbc:
		dbDone = true
		if db.err != nil {
			return nil, nil, db.err
		}
	case <-waiting:
	}
	pub, perr := reach(ctx, &st.broker, w, func(ctx context.Context) (broker.Publisher, error) {
		return open.Publisher(ctx, g.broker, g.log)
	}, func(err error) bool { return !errors.Is(err, txbox.ErrBrokerUnavailable) }, nil)
	if perr != nil {
		cancel()
	}
	if !dbDone {
		db = <-dbc
	}
	if db.err == nil && perr == nil {
		return db.s, pub, nil
	}
	if db.s != nil {
		db.s.Close()
	}
	if pub != nil {
		_ = pub.Close()
	}
	// The failure that ended the start, not the wait it cut short.
	for _, err := range []error{db.err, perr} {
		if err != nil && !errors.Is(err, errStopped) {
			return nil, nil, err
		}
	}
	return nil, nil, errStopped
}

// reachTimeout bounds one try to reach the database: a server whose
// packets are dropped rather than refused would otherwise hold the first
// try, and the log line that says the relay waits, for the kernel's connect
// timeout (about two minutes).
const reachTimeout = 15 * time.Second

// dbFatal: which failures to open the database no wait can fix.
func (g *globals) dbFatal(err error) bool {
	var f final
	return errors.Is(err, txbox.ErrConfig) || errors.As(err, &f) || scheme(g.db) == "sqlite"
}

// openRelayStore opens the relay's database and prepares it: the outbox
// table must exist, or with --migrate is created. A failure to reach the
// database may be waited for; a failure after it answered is final.
func (g *globals) openRelayStore(ctx context.Context, migrate bool) (store.Store, error) {
	tctx, cancel := context.WithTimeout(ctx, reachTimeout)
	s, err := g.reachStore(tctx)
	cancel()
	if err != nil {
		return nil, err
	}
	if migrate {
		err = s.Migrate(ctx)
	} else {
		err = checkOutbox(ctx, s)
	}
	if err != nil {
		s.Close()
		return nil, final{err}
	}
	return s, nil
}
