package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/promtest"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/telemetry/prom"
)

// TestMetricsAndProgress: a relay with a registry counts what it delivered,
// samples the backlog down to 0, logs progress while it works with the
// event-free summary fields, and stays silent once idle.
func TestMetricsAndProgress(t *testing.T) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	var evs []txbox.Event
	for i := range 300 {
		evs = append(evs, txbox.MustEvent("Order", fmt.Sprintf("o%d", i%30), "Created", nil))
	}
	write(t, s, evs...)
	reg := prometheus.NewRegistry()
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Metrics: prom.NewRelayMetrics(reg), Logger: log, BatchSize: 50,
		MetricsInterval: 20 * time.Millisecond, ProgressEvery: 50 * time.Millisecond})
	testenv.WaitFor(t, time.Minute, "backlog 0 and all delivered", func() bool {
		return promtest.Value(t, reg, "txbox_relay_published_total", "outcome", "delivered") == 300 &&
			promtest.Value(t, reg, "txbox_outbox_backlog", "status", "pending") == 0 &&
			promtest.Value(t, reg, "txbox_outbox_oldest_pending_age_seconds") == 0
	})
	if n := promtest.Value(t, reg, "txbox_relay_commit_to_publish_seconds"); n != 300 {
		t.Fatalf("commit-to-publish observations %v, want 300", n)
	}
	if n := promtest.Value(t, reg, "txbox_relay_claim_rows"); n < 6 {
		t.Fatalf("claims with rows %v, want >= 6 (300 rows, batch 50)", n)
	}
	// Sampled every 20 ms: a loaded machine may time out one sample
	// (ready 0 until the next), so the gauges are waited for.
	testenv.WaitFor(t, time.Minute, "broker_up and ready 1", func() bool {
		return promtest.Value(t, reg, "txbox_relay_broker_up") == 1 && promtest.Value(t, reg, "txbox_relay_ready") == 1
	})
	if err := r.Alive(); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	lint, err := testutil.GatherAndLint(reg)
	if err != nil || len(lint) > 0 {
		t.Fatalf("metric lint: %v %v", err, lint)
	}
	testenv.WaitFor(t, time.Minute, "a progress line", func() bool { return strings.Contains(logs.String(), `"msg":"relay progress"`) })
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "relay progress") {
			line = l
			break
		}
	}
	for _, k := range []string{`"published":`, `"rate_per_s":`, `"publishing":"`, `"backlog":`, `"oldest_age":"`, `"dead_marked":`, `"deferred":`, `"dead_in_table":`} {
		if !strings.Contains(line, k) {
			t.Fatalf("progress line lacks %s: %s", k, line)
		}
	}
	// Idle: after one more window no further progress lines come.
	time.Sleep(150 * time.Millisecond)
	before := strings.Count(logs.String(), "relay progress")
	time.Sleep(300 * time.Millisecond)
	if after := strings.Count(logs.String(), "relay progress"); after != before {
		t.Fatalf("an idle relay logged %d progress lines", after-before)
	}
}

// down fails every publish as an unreachable broker does.
type down struct{ broker.Publisher }

func (down) Publish(_ context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = fmt.Errorf("%w: connection refused", txbox.ErrBrokerUnavailable)
	}
	return errs
}

// TestReadyFailsWhileStalled: with the broker down, Ready fails naming the
// broker; with rows waiting and nothing published for StallAfter it fails
// as stalled, and an old pending row fails MaxPendingAge.
func TestReadyFailsWhileStalled(t *testing.T) {
	s := openPG(t)
	write(t, s, txbox.MustEvent("Order", "o1", "Created", nil))
	r, _, _ := run(t, relay.Config{Store: s, Publisher: down{membroker.New(membroker.Options{})}, StallAfter: 300 * time.Millisecond,
		MetricsInterval: 20 * time.Millisecond, BackoffBase: time.Hour, BackoffMax: time.Hour})
	testenv.WaitFor(t, time.Minute, "not ready: broker", func() bool {
		err := r.Ready(context.Background())
		return errors.Is(err, relay.ErrNotReady) && strings.Contains(err.Error(), "broker")
	})

	s2 := openPG(t)
	write(t, s2, txbox.MustEvent("Order", "o1", "Created", nil))
	// A relay whose claims never reach the rows (lease claims on rows a
	// foreign lease holds would do; here the relay is simply not run): the
	// backlog waits, nothing is published.
	// StallAfter is seconds, not milliseconds: the first Ready's sample
	// took over 200 ms on a loaded machine.
	r2, err := relay.New(relay.Config{Store: s2, Publisher: membroker.New(membroker.Options{}), StallAfter: 3 * time.Second, MaxPendingAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Ready(context.Background()); err != nil {
		t.Fatalf("ready before StallAfter passed: %v", err)
	}
	time.Sleep(3100 * time.Millisecond)
	if err := r2.Ready(context.Background()); !errors.Is(err, relay.ErrNotReady) || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("want stalled, got %v", err)
	}
	r3, err := relay.New(relay.Config{Store: s2, Publisher: membroker.New(membroker.Options{}), MaxPendingAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r3.Ready(context.Background()); !errors.Is(err, relay.ErrNotReady) || !strings.Contains(err.Error(), "oldest pending") {
		t.Fatalf("want oldest pending, got %v", err)
	}
}

// A log line about one event names it: event_id, aggregate_type,
// aggregate_id, event_type.
func TestEventLogLinesNameTheEvent(t *testing.T) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	b.FailNext(1, txbox.Permanent(errors.New("refused")))
	ev := txbox.MustEvent("Order", "o-7", "Created", nil)
	write(t, s, ev)
	var logs testenv.SyncBuffer
	run(t, relay.Config{Store: s, Publisher: b, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	testenv.WaitFor(t, time.Minute, "the DEAD line", func() bool { return strings.Contains(logs.String(), "event is DEAD") })
	for _, kv := range []string{`"event_id":"` + ev.ID + `"`, `"aggregate_type":"Order"`, `"aggregate_id":"o-7"`, `"event_type":"Created"`} {
		if !strings.Contains(logs.String(), kv) {
			t.Fatalf("DEAD line lacks %s:\n%s", kv, logs.String())
		}
	}
}

// pingable is a publisher whose broker can be asked whether it answers.
type pingable struct {
	*membroker.Broker
	err atomic.Pointer[error]
}

func (p *pingable) Ping(context.Context) error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

// An idle relay learns that its broker went away by pinging it, and that it
// came back.
func TestIdleRelayPingsItsBroker(t *testing.T) {
	s := openPG(t)
	p := &pingable{Broker: membroker.New(membroker.Options{})}
	r, _, _ := run(t, relay.Config{Store: s, Publisher: p, MetricsInterval: 20 * time.Millisecond})
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	down := fmt.Errorf("%w: connection refused", txbox.ErrBrokerUnavailable)
	p.err.Store(&down)
	testenv.WaitFor(t, time.Minute, "not ready: broker", func() bool {
		err := r.Ready(context.Background())
		return errors.Is(err, relay.ErrNotReady) && strings.Contains(err.Error(), "broker")
	})
	p.err.Store(nil)
	testenv.WaitFor(t, time.Minute, "ready again", func() bool { return r.Ready(context.Background()) == nil })
}
