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

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/promtest"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/prom"
)

// counting counts publish calls.
type counting struct {
	broker.Publisher
	calls atomic.Int64
}

func (c *counting) Publish(ctx context.Context, msgs []broker.Message) []error {
	c.calls.Add(1)
	return c.Publisher.Publish(ctx, msgs)
}

// outageBacklog writes n events for each of aggs, interleaved, and returns
// them in write order.
func outageBacklog(t *testing.T, s *postgres.Store, typ string, n int, aggs ...string) []txbox.Event {
	t.Helper()
	evs := testenv.Interleaved(typ, n, aggs...)
	write(t, s, evs...)
	return evs
}

// checkRows fails if any row of evs is DEAD or spent an attempt.
func checkRows(t *testing.T, s store.Store, evs []txbox.Event, when string) {
	t.Helper()
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	recs, err := s.List(context.Background(), store.Filter{EventIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(evs) {
		t.Fatalf("%s: %d of %d rows found", when, len(recs), len(evs))
	}
	for _, r := range recs {
		if r.Status == txbox.StatusDead || r.RetryCount != 0 {
			t.Fatalf("%s: %s/%s is %s with retry_count %d (%s): an outage must spend no attempt", when, r.AggregateID, r.EventID, r.Status, r.RetryCount, r.LastError)
		}
	}
}

// checkFirstOrder fails unless the first delivery of each event of evs
// follows write order within its aggregate, and every one was delivered.
func checkFirstOrder(t *testing.T, got []broker.Message, evs []txbox.Event) {
	t.Helper()
	if n, _ := testenv.FirstOrder(t, "delivered", evs, got, messageKey); n != len(evs) {
		t.Fatalf("%d of %d events delivered", n, len(evs))
	}
}

// messageKey is a message's event id and aggregate id, for
// testenv.FirstOrder.
func messageKey(m broker.Message) (string, string) { return m.Event.ID, m.Event.AggregateID }

func countLines(logs string, msg string) int {
	return strings.Count(logs, `"msg":"`+msg)
}

// TestBrokerOutageSpendsNoAttempts: the broker is away for many times the
// whole retry schedule (MaxAttempts 3 with back-off of 10-20 ms would send
// every event DEAD within about 50 ms). Nothing goes DEAD, no row's
// retry_count moves, the relay pauses instead of claiming and failing in a
// tight loop, reports the outage (readiness, broker_up, one log line at its
// start and one at its end), and once the broker is back it delivers every
// event within one probe interval, each aggregate in order.
func TestBrokerOutageSpendsNoAttempts(t *testing.T) { eachClaims(t, testBrokerOutage) }

func testBrokerOutage(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	c := &counting{Publisher: b}
	b.SetDown(true)
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	const probeMax = 200 * time.Millisecond
	r, _, _ := run(t, relay.Config{Store: s, Publisher: c, Claims: claims, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 20 * time.Millisecond, OutageProbeMax: probeMax, Metrics: prom.NewRelayMetrics(reg), MetricsInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	evs := outageBacklog(t, s, "Order", 4, "a", "b", "c")
	testenv.WaitFor(t, time.Minute, "readiness to report the outage", func() bool {
		err := r.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "broker: outage")
	})
	if up := promtest.Value(t, reg, "txbox_relay_broker_up"); up != 0 {
		t.Fatalf("txbox_relay_broker_up = %v during the outage", up)
	}
	start := c.calls.Load()
	const down = 2 * time.Second
	end := time.Now().Add(down)
	for time.Now().Before(end) {
		checkRows(t, s, evs, "during the outage")
		time.Sleep(50 * time.Millisecond)
	}
	// Probes double from 10 ms to 200 ms: about 15 in 2 s. Claiming and
	// publishing at the poll interval (10 ms) would be about 200.
	if n := c.calls.Load() - start; n > 40 {
		t.Fatalf("%d publish calls in %v of outage: the relay did not pause", n, down)
	}
	if st := r.Stats(); st.Dead != 0 || st.Retried != 0 || st.Deferred == 0 {
		t.Fatalf("dead %d, retried %d, deferred %d: want only deferrals", st.Dead, st.Retried, st.Deferred)
	}
	if d := promtest.Value(t, reg, "txbox_relay_published_total", "outcome", "deferred"); d == 0 {
		t.Fatal("txbox_relay_published_total{outcome=deferred} stayed 0")
	}
	back := time.Now()
	b.SetDown(false)
	testenv.WaitFor(t, time.Minute, "every event delivered", func() bool { return len(b.Messages()) >= len(evs) })
	// One probe interval, and the claim and publish after it.
	if took := time.Since(back); took > probeMax+time.Second {
		t.Fatalf("delivered %v after the broker came back, want within one probe interval (%v) and a claim", took, probeMax)
	}
	checkFirstOrder(t, b.Messages(), evs)
	testenv.WaitFor(t, time.Minute, "ready again", func() bool { return r.Ready(context.Background()) == nil })
	var sent []store.Record
	testenv.WaitFor(t, time.Minute, "every row marked SENT", func() bool {
		var err error
		sent, err = s.List(context.Background(), store.Filter{Status: txbox.StatusSent})
		return err == nil && len(sent) == len(evs)
	})
	for _, rec := range sent {
		if rec.RetryCount != 0 {
			t.Fatalf("%s delivered with retry_count %d", rec.EventID, rec.RetryCount)
		}
	}
	if up := promtest.Value(t, reg, "txbox_relay_broker_up"); up != 1 {
		t.Fatalf("txbox_relay_broker_up = %v after the outage", up)
	}
	l := logs.String()
	if a, z := countLines(l, "broker outage: publishing paused"), countLines(l, "broker outage over"); a != 1 || z != 1 {
		t.Fatalf("%d start and %d end lines, want one of each:\n%s", a, z, l)
	}
	// The three aggregates' heads were published and failed; all 12 waited.
	if !strings.Contains(l, `"events_deferred":3,"backlog":12`) {
		t.Fatalf("the end line does not count the 3 events deferred and the 12 that waited:\n%s", l)
	}
}

// TestMissingDestinationIsAnOutage: one destination refuses publishes for
// an outage of its own (a stream deleted under the relay: NATS reports no
// stream for the subject) while the broker takes the rest. Its events wait
// without spending attempts, blocking only their own aggregates; the other
// topic flows; readiness and txbox_relay_destinations_down say which
// topic; once the destination is back its events follow, in order.
func TestMissingDestinationIsAnOutage(t *testing.T) { eachClaims(t, testMissingDestination) }

func testMissingDestination(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	missing := fmt.Errorf("%w: no stream captures the subject", txbox.ErrBrokerUnavailable)
	f := &faulty{Publisher: b, failTopic: map[string]bool{"outbox.Invoice.E": true}, err: missing}
	reg := prometheus.NewRegistry()
	var logs testenv.SyncBuffer
	const probeMax = 200 * time.Millisecond
	r, _, _ := run(t, relay.Config{Store: s, Publisher: f, Claims: claims, MaxAttempts: 2, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 20 * time.Millisecond, OutageProbeMax: probeMax, Metrics: prom.NewRelayMetrics(reg), MetricsInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// Invoices and orders in one transaction, so the first claim holds
	// both topics: with invoices alone nothing would tell a missing
	// destination from a broker that is down.
	invoices, orders := testenv.Interleaved("Invoice", 3, "i1", "i2"), testenv.Interleaved("Order", 3, "o1", "o2")
	write(t, s, append(append([]txbox.Event{}, invoices...), orders...)...)
	testenv.WaitFor(t, time.Minute, "orders delivered past the missing destination", func() bool { return len(b.Messages()) >= len(orders) })
	testenv.WaitFor(t, time.Minute, "readiness to name the destination", func() bool {
		err := r.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), `"outbox.Invoice.E"`)
	})
	if n := promtest.Value(t, reg, "txbox_relay_destinations_down"); n != 1 {
		t.Fatalf("txbox_relay_destinations_down = %v, want 1", n)
	}
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		checkRows(t, s, invoices, "while the destination is missing")
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range b.Messages() {
		if m.Event.AggregateType == "Invoice" {
			t.Fatalf("invoice %s delivered while its destination refused", m.Event.ID)
		}
	}
	more := outageBacklog(t, s, "Order", 2, "o3")
	testenv.WaitFor(t, time.Minute, "orders written during the outage delivered", func() bool { return len(b.Messages()) >= len(orders)+len(more) })
	back := time.Now()
	f.mu.Lock()
	f.failTopic = nil
	f.mu.Unlock()
	all := len(invoices) + len(orders) + len(more)
	testenv.WaitFor(t, time.Minute, "invoices delivered", func() bool { return len(b.Messages()) >= all })
	if took := time.Since(back); took > probeMax+time.Second {
		t.Fatalf("invoices delivered %v after the destination came back, want within one probe interval (%v)", took, probeMax)
	}
	checkFirstOrder(t, b.Messages(), append(append(invoices, orders...), more...))
	testenv.WaitFor(t, time.Minute, "ready again", func() bool { return r.Ready(context.Background()) == nil })
	if st := r.Stats(); st.Dead != 0 || st.Retried != 0 {
		t.Fatalf("dead %d, retried %d: a missing destination must spend no attempts", st.Dead, st.Retried)
	}
	l := logs.String()
	if a, z := countLines(l, "destination refuses publishes"), countLines(l, "destination takes publishes again"); a != 1 || z != 1 {
		t.Fatalf("%d start and %d end lines for the destination, want one of each:\n%s", a, z, l)
	}
	if strings.Contains(l, "broker outage") {
		t.Fatalf("a destination's outage was reported as the broker's:\n%s", l)
	}
}

// TestOutageErrorsAreOutages: what counts as a failure of the way out.
func TestOutageErrorsAreOutages(t *testing.T) {
	s := openPG(t)
	for _, c := range []struct {
		err    error
		outage bool
	}{
		{txbox.Unavailable(errors.New("connection refused")), true},
		{fmt.Errorf("nats: publish: %w", context.DeadlineExceeded), true},
		{txbox.DatabaseUnavailable(errors.New("read-only")), true},
		{errors.New("the broker refused the message"), false},
	} {
		f := &faulty{Publisher: membroker.New(membroker.Options{}), fail: map[string]bool{"x": true}, err: c.err}
		e := txbox.MustEvent("Order", "x", "E", nil)
		write(t, s, e)
		r, cancel, done := run(t, relay.Config{Store: s, Publisher: f, MaxAttempts: 1, BackoffBase: 10 * time.Millisecond, OutageProbeMax: 50 * time.Millisecond})
		testenv.WaitFor(t, time.Minute, "a failed publish", func() bool { st := r.Stats(); return st.Deferred+st.Dead > 0 })
		cancel()
		<-done
		st := r.Stats()
		if got := st.Deferred > 0 && st.Dead == 0; got != c.outage {
			t.Fatalf("%v: deferred %d, dead %d; outage = %v", c.err, st.Deferred, st.Dead, c.outage)
		}
		if _, err := s.Purge(context.Background(), store.Filter{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(context.Background(), "DELETE FROM "+s.Tables().Outbox); err != nil {
			t.Fatal(err)
		}
	}
}
