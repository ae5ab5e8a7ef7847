package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

func TestDeliversEverythingInAggregateOrder(t *testing.T) {
	eachClaims(t, testDeliversInAggregateOrder)
}

func testDeliversInAggregateOrder(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	evs := testenv.Backlog(600, 7, "OrderUpdated")
	write(t, s, evs...)
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, BatchSize: 50, Claims: claims})
	testenv.WaitFor(t, 20*time.Second, "600 published", func() bool { return len(b.Messages()) >= 600 })
	last := map[string]int{}
	pos := map[string]int{}
	for i, e := range evs {
		pos[e.ID] = i
	}
	for _, m := range b.Messages() {
		p := pos[m.Event.ID]
		if prev, ok := last[m.Event.AggregateID]; ok && p < prev {
			t.Fatalf("aggregate %s: #%d after #%d", m.Event.AggregateID, p, prev)
		}
		last[m.Event.AggregateID] = p
		if m.Topic != "outbox.Order.OrderUpdated" || m.Source != "txbox" {
			t.Fatalf("topic %q source %q", m.Topic, m.Source)
		}
	}
	waitSent(t, s, 600, 5*time.Second, "all SENT")
	if got := r.Stats().Published; got != 600 {
		t.Fatalf("published counter %d", got)
	}
}

func TestFailingAggregateBlocksOnlyItself(t *testing.T) {
	eachClaims(t, testFailingAggregateBlocksOnlyItself)
}

func testFailingAggregateBlocksOnlyItself(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	// A failure of the event's own (the broker refuses it), which spends
	// attempts; an outage would spend none (outage_test.go).
	f := &faulty{Publisher: b, fail: map[string]bool{"bad": true}, err: errors.New("injected: refused")}
	var evs []txbox.Event
	for i := range 5 {
		evs = append(evs, txbox.MustEvent("Order", "bad", "E", map[string]int{"i": i}), txbox.MustEvent("Order", fmt.Sprintf("good-%d", i), "E", nil))
	}
	write(t, s, evs...)
	r, _, _ := run(t, relay.Config{Store: s, Publisher: f, BackoffBase: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, MaxAttempts: 1000, Claims: claims})
	testenv.WaitFor(t, time.Minute, "good aggregates delivered", func() bool { return len(b.Messages()) == 5 })
	testenv.WaitFor(t, time.Minute, "several retries of the bad head", func() bool { return r.Stats().Retried >= 3 })
	for _, m := range b.Messages() {
		if m.Event.AggregateID == "bad" {
			t.Fatal("event of the failing aggregate published")
		}
	}
	recs, _ := s.List(context.Background(), store.Filter{AggregateID: "bad"})
	if recs[0].Status != txbox.StatusRetry || recs[0].RetryCount < 3 || !strings.Contains(recs[0].LastError, "injected") {
		t.Fatalf("head of bad aggregate: %+v", recs[0])
	}
	for _, rec := range recs[1:] {
		if rec.RetryCount != 0 || rec.Status == txbox.StatusSent {
			t.Fatalf("later event of the blocked aggregate was attempted: %+v", rec)
		}
	}
	// The cause goes away: the aggregate drains, in order.
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	testenv.WaitFor(t, time.Minute, "bad aggregate drained", func() bool { return len(b.Messages()) == 10 })
	var order []string
	for _, m := range b.Messages() {
		if m.Event.AggregateID == "bad" {
			order = append(order, string(m.Event.Payload))
		}
	}
	if strings.Join(order, "") != `{"i":0}{"i":1}{"i":2}{"i":3}{"i":4}` {
		t.Fatalf("order after recovery: %v", order)
	}
}

func TestPermanentErrorGoesDeadAndRestFlows(t *testing.T) { eachClaims(t, testPermanentErrorGoesDead) }

func testPermanentErrorGoesDead(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{MaxPayload: 1000})
	big := txbox.MustEvent("Order", "o-1", "E", map[string]string{"blob": strings.Repeat("x", 5000)})
	next := txbox.MustEvent("Order", "o-1", "E", map[string]int{"after": 1})
	write(t, s, big, next, txbox.MustEvent("Order", "o-2", "E", nil))
	// A foreign producer's row with headers that are not an object of strings.
	ctx := context.Background()
	bad := txbox.NewID()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO `+s.Tables().Outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES ($1, 'Order', 'o-3', 'E', '{}', '[1,2]')`, bad); err != nil {
		t.Fatal(err)
	}
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, MaxAttempts: 10, Claims: claims})
	testenv.WaitFor(t, time.Minute, "two delivered", func() bool { return len(b.Messages()) == 2 })
	testenv.WaitFor(t, time.Minute, "two dead", func() bool { return r.Stats().Dead == 2 })
	dead, _ := s.List(ctx, store.Filter{Status: txbox.StatusDead})
	if len(dead) != 2 {
		t.Fatalf("dead: %d", len(dead))
	}
	for _, d := range dead {
		if d.RetryCount != 1 || !strings.HasPrefix(d.LastError, "permanent:") {
			t.Fatalf("dead row must not spend its attempts and must say why: %+v", d)
		}
	}
	if !strings.Contains(dead[0].LastError+dead[1].LastError, "headers") {
		t.Fatalf("undecodable headers not named: %q / %q", dead[0].LastError, dead[1].LastError)
	}
}

// TestGivesUpAfterMaxAttempts: a failure of the event's own (here the
// broker refusing it, for no reason the adapter calls permanent) spends an
// attempt each time, and after MaxAttempts the row is DEAD. A broker outage
// does neither: TestBrokerOutageSpendsNoAttempts.
func TestGivesUpAfterMaxAttempts(t *testing.T) { eachClaims(t, testGivesUpAfterMaxAttempts) }

func testGivesUpAfterMaxAttempts(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	f := &faulty{Publisher: membroker.New(membroker.Options{}), fail: map[string]bool{"o-1": true}, err: errors.New("injected: the broker refused the message")}
	e := txbox.MustEvent("Order", "o-1", "E", nil)
	write(t, s, e)
	r, _, _ := run(t, relay.Config{Store: s, Publisher: f, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Claims: claims})
	testenv.WaitFor(t, time.Minute, "dead after 3 attempts", func() bool { return r.Stats().Dead == 1 })
	recs, _ := s.List(context.Background(), store.Filter{EventIDs: []string{e.ID}})
	if recs[0].Status != txbox.StatusDead || recs[0].RetryCount != 3 || !strings.Contains(recs[0].LastError, "after 3 attempts") {
		t.Fatalf("%+v", recs[0])
	}
	if st := r.Stats(); st.Retried != 2 || st.Deferred != 0 {
		t.Fatalf("retried %d, deferred %d: want 2 attempts spent before the third went DEAD, none deferred", st.Retried, st.Deferred)
	}
}

// Shutdown ends every claim: what was published is SENT, the rest can be
// claimed again at once. Lease claims write PROCESSING into the rows they
// hold, so "no PROCESSING row" after shutdown shows their release; a
// transaction-held claim never writes PROCESSING, so there the probe claim,
// which skips rows a claim's transaction still locks, is what shows it.
func TestShutdownFinishesOrReleasesInFlight(t *testing.T) { eachClaims(t, testShutdownReleases) }

func testShutdownReleases(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	f := &faulty{Publisher: b, delay: 300 * time.Millisecond}
	write(t, s, testenv.Backlog(40, 1, "E")...)
	_, cancel, done := run(t, relay.Config{Store: s, Publisher: f, BatchSize: 40, Claims: claims})
	testenv.WaitFor(t, time.Minute, "publishing started", func() bool { return f.calls.Load() > 0 })
	inFlight, _ := s.Stats(context.Background())
	switch leased := inFlight.Counts[txbox.StatusProcessing]; {
	case claims == relay.ClaimLease && leased == 0:
		t.Fatalf("lease claims hold rows as PROCESSING, yet none is while publishing: %v", inFlight.Counts)
	case claims == relay.ClaimAuto && leased != 0:
		t.Fatalf("transaction-held claims wrote PROCESSING into %d rows", leased)
	}
	if n := claimable(t, s); n != 0 {
		t.Fatalf("another relay could claim %d rows of the running claim", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("relay did not stop within 2s: it must not drain a 12s lane on shutdown")
	}
	st, _ := s.Stats(context.Background())
	if st.Counts[txbox.StatusProcessing] != 0 {
		t.Fatalf("shutdown left %d rows leased: %v", st.Counts[txbox.StatusProcessing], st.Counts)
	}
	if st.Counts[txbox.StatusPending] == 0 {
		t.Fatalf("nothing was released: %v", st.Counts)
	}
	if sent := st.Counts[txbox.StatusSent]; sent != int64(len(b.Messages())) {
		t.Fatalf("sent %d but broker has %d", sent, len(b.Messages()))
	}
	if n, want := claimable(t, s), st.Counts[txbox.StatusPending]; int64(n) != want {
		t.Fatalf("after shutdown another relay could claim %d of the %d unsent rows: the rest are still held", n, want)
	}
}

func TestLeaseDeadlineReleasesUnpublished(t *testing.T) { eachClaims(t, testLeaseDeadlineReleases) }

func testLeaseDeadlineReleases(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	f := &faulty{Publisher: b, delay: 150 * time.Millisecond}
	// A round takes 150 ms; the publish timeout leaves a loaded machine
	// ten times that, so no round fails and only the lease's end stops the
	// lane: 60 rounds cannot fit in a 4 s lease.
	const deep = 60
	write(t, s, testenv.Backlog(deep, 1, "E")...)
	r, err := relay.New(relay.Config{Store: s, Publisher: f, BatchSize: deep, Lease: 4 * time.Second, PublishTimeout: 1500 * time.Millisecond, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.RunOnce(context.Background())
	if err != nil || n != deep {
		t.Fatalf("run once: %d %v", n, err)
	}
	rel := r.Stats().Released
	if rel == 0 || rel == deep {
		t.Fatalf("a %d-deep lane at 150ms per round cannot finish in a 4s lease: released %d", deep, rel)
	}
	st, _ := s.Stats(context.Background())
	if st.Counts[txbox.StatusSent]+st.Counts[txbox.StatusPending] != deep || st.Counts[txbox.StatusProcessing] != 0 {
		t.Fatalf("after deadline: %v", st.Counts)
	}
	if n, want := claimable(t, s), st.Counts[txbox.StatusPending]; int64(n) != want {
		t.Fatalf("after the deadline another relay could claim %d of the %d released rows", n, want)
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	s := &postgres.Store{}
	b := membroker.New(membroker.Options{})
	for _, c := range []struct {
		cfg   relay.Config
		field string
	}{
		{relay.Config{Publisher: b}, "Store"},
		{relay.Config{Store: s}, "Publisher"},
		{relay.Config{Store: s, Publisher: b, BatchSize: -1}, "BatchSize"},
		{relay.Config{Store: s, Publisher: b, Lease: time.Second, PublishTimeout: time.Second}, "PublishTimeout"},
		{relay.Config{Store: s, Publisher: b, BackoffBase: time.Minute, BackoffMax: time.Second}, "BackoffMax"},
		{relay.Config{Store: s, Publisher: b, PollInterval: time.Second, IdlePollMax: 100 * time.Millisecond}, "IdlePollMax"},
		{relay.Config{Store: s, Publisher: b, Topic: "x.{aggregate}"}, "--topic"},
	} {
		_, err := relay.New(c.cfg)
		var ce *txbox.ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, c.field) {
			t.Fatalf("want config error on %s, got %v", c.field, err)
		}
	}
}

// With PostgreSQL wake-ups, a committed event is published at once even
// though the relay polls only every 10 seconds.
func TestWakeupDeliversWithoutWaitingForThePoll(t *testing.T) { eachClaims(t, testWakeup) }

func testWakeup(t *testing.T, claims relay.ClaimMode) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := postgres.Listen(ctx, s.Pool(), postgres.WakeupChannel(s.Tables().Outbox), nil)
	select { // the listener's first signal: it is listening
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("listener did not start")
	}
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, PollInterval: 10 * time.Second, Wakeup: wake, Claims: claims})
	testenv.WaitFor(t, time.Minute, "the relay's first (empty) claim", func() bool { return r.Stats().IdleWaits >= 1 })
	w := outbox.NewWriter(s.Dialect(), outbox.WithWakeup())
	for i := range 5 {
		start := time.Now()
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			return pgxtx.Add(ctx, tx, w, txbox.MustEvent("Order", fmt.Sprintf("o-%d", i), "E", nil))
		})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 2*time.Second, "delivery woken by NOTIFY", func() bool { return len(b.Messages()) == i+1 })
		if d := time.Since(start); d > time.Second {
			t.Fatalf("delivery took %v: the relay waited for its poll", d)
		}
		// Once the batch has ended the relay claims again, finds nothing and
		// idles; a row written before that claim would be found by it,
		// wake-up or not, so the next write waits for the idle.
		testenv.WaitFor(t, time.Minute, "the relay idle again", func() bool { return r.Stats().IdleWaits >= int64(i)+2 })
	}
	// Without the wake-up option nothing notifies: the relay waits its poll.
	plain := outbox.NewWriter(s.Dialect())
	if err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		return pgxtx.Add(ctx, tx, plain, txbox.MustEvent("Order", "quiet", "E", nil))
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if len(b.Messages()) != 5 {
		t.Fatal("a write without WithWakeup woke the relay: the test cannot tell wake-ups from polls")
	}
}
