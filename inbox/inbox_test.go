package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// env is one test's world: a PostgreSQL store on fresh tables with a
// business table, and a JetStream stream of its own on the local server.
type env struct {
	t       *testing.T
	s       *postgres.Store
	effects *storeenv.Effects
	url     string
	stream  string
	prefix  string
	js      jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	ctx := context.Background()
	e := &env{t: t, s: s, effects: storeenv.NewEffects(t, s, storeenv.Postgres{}.SQLDB(t, s)), url: testenv.URL(t, "TXBOX_TEST_NATS")}
	e.prefix = "ib" + strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	e.stream = strings.ToUpper(e.prefix)
	e.js = testenv.JetStream(t, e.url)
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.prefix + ".>"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.js.DeleteStream(context.Background(), e.stream) })
	return e
}

func (e *env) topic() broker.Topic { return broker.Topic(e.prefix + ".{aggregate_type}.{event_type}") }

func (e *env) write(evs ...txbox.Event) {
	e.t.Helper()
	storeenv.Write(e.t, storeenv.Postgres{}, e.s, evs...)
}

// relay runs an in-process relay into the stream until the test ends.
func (e *env) relay() {
	e.t.Helper()
	p, err := natsbroker.Open(context.Background(), e.url, natsbroker.Options{Stream: e.stream})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: e.s, Publisher: p, Topic: e.topic(), PollInterval: 10 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	testenv.Go(e.t, r.Run)
}

func (e *env) subscriber(durable string, ackWait time.Duration) broker.Subscriber {
	e.t.Helper()
	sub, err := natsbroker.OpenSubscriber(context.Background(), e.url, natsbroker.SubscriberOptions{Stream: e.stream, Durable: durable, AckWait: ackWait})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// applyEffect is the business write: a second application of one event
// shows up as n = 2.
func (e *env) applyEffect(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
	_, err := tx.Exec(ctx, e.effects.Upsert, ev.ID)
	return err
}

func (e *env) consumer(cfg inbox.Config, h func(context.Context, pgx.Tx, txbox.Event) error) *inbox.Consumer {
	c, _ := e.stoppableConsumer(cfg, h)
	return c
}

// stoppableConsumer runs a consumer until the returned stop is called or the
// test ends.
func (e *env) stoppableConsumer(cfg inbox.Config, h func(context.Context, pgx.Tx, txbox.Event) error) (*inbox.Consumer, func()) {
	e.t.Helper()
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	}
	if cfg.ReplayInterval == 0 {
		cfg.ReplayInterval = 100 * time.Millisecond
	}
	c, err := inbox.New(e.s, cfg, h)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, testenv.Go(e.t, c.Run)
}

// orderUpdated is version v of aggregate agg's OrderUpdated event, for
// the tests of VersionGuard and Ordered.
func orderUpdated(agg string, v int64) txbox.Event {
	ev := txbox.MustEvent("Order", agg, "OrderUpdated", map[string]int64{"version": v})
	ev.AggregateVersion = v
	return ev
}

// effectCounts returns event id -> times applied.
func (e *env) effectCounts() map[string]int {
	e.t.Helper()
	return e.effects.Counts(e.t)
}

// appliedOnce fails the test unless every effect was applied exactly once,
// and returns the effects' counts.
func (e *env) appliedOnce() map[string]int {
	e.t.Helper()
	got := e.effectCounts()
	for id, n := range got {
		if n != 1 {
			e.t.Fatalf("%s applied %d times", id, n)
		}
	}
	return got
}

// waitProgress waits until count reaches want, for as long as count keeps
// growing: it fails when it did not grow for stall, or after limit. On a
// loaded machine a fixed deadline measures the machine; a stall is the
// consumer's.
func waitProgress(t *testing.T, what string, stall, limit time.Duration, want int, count func() int) {
	t.Helper()
	start, last, lastAt := time.Now(), -1, time.Now()
	for {
		n := count()
		if n >= want {
			return
		}
		if n > last {
			last, lastAt = n, time.Now()
		}
		switch {
		case time.Since(lastAt) > stall:
			t.Fatalf("%s: %d of %d, none for %v", what, n, want, stall)
		case time.Since(start) > limit:
			t.Fatalf("%s: %d of %d after %v", what, n, want, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) inboxRow(consumer, eventID string) store.InboxRow {
	e.t.Helper()
	rows, err := e.s.InboxList(context.Background(), store.InboxFilter{Consumer: consumer, EventIDs: []string{eventID}})
	if err != nil || len(rows) != 1 {
		e.t.Fatalf("inbox row %s/%s: %v (%d rows)", consumer, eventID, err, len(rows))
	}
	return rows[0]
}

// TestOneEventDeliveredFiveTimes: the relay republishes the event (a crash
// between ack and mark), and the stream is replayed to the consumer; the
// business table changes once and the duplicate counter reads 4.
func TestOneEventDeliveredFiveTimes(t *testing.T) {
	e := newEnv(t)
	ev := txbox.MustEvent("Order", "o-1", "OrderCreated", map[string]int{"qty": 3})
	e.write(ev)
	e.relay()
	republish := func() {
		// What a relay crash between the broker's ack and the SENT mark
		// leaves behind: the row unsent, so it is published again. Past the
		// stream's 1s duplicate window, JetStream stores the copy too.
		time.Sleep(1100 * time.Millisecond)
		tag, err := e.s.Pool().Exec(context.Background(), `UPDATE `+e.s.Tables().Outbox+` SET status = 'PENDING' WHERE event_id = $1`, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() == 0 {
			// A store that moves delivered rows out of the outbox table
			// has nothing to reset: the event is written again instead,
			// which the relay publishes the same way.
			e.write(ev)
		}
	}
	streamHas := func(n uint64) func() bool {
		return func() bool {
			info, err := e.js.Stream(context.Background(), e.stream)
			return err == nil && info.CachedInfo().State.Msgs == n
		}
	}
	testenv.WaitFor(t, time.Minute, "first publish", streamHas(1))
	republish()
	testenv.WaitFor(t, time.Minute, "relay republish", streamHas(2))

	c, stop := e.stoppableConsumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second)}, e.applyEffect)
	testenv.WaitFor(t, time.Minute, "two deliveries", func() bool { return c.Stats().Processed+c.Stats().Duplicates == 2 })
	stop()

	// Replay the stream: a new durable consumer for the same inbox name
	// starts from the first message again.
	c2 := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory-replay", 30*time.Second)}, e.applyEffect)
	testenv.WaitFor(t, time.Minute, "stream replay", func() bool { return c2.Stats().Duplicates == 2 })

	republish()
	testenv.WaitFor(t, time.Minute, "third copy", streamHas(3))
	testenv.WaitFor(t, time.Minute, "five deliveries", func() bool {
		return c.Stats().Processed+c.Stats().Duplicates+c2.Stats().Processed+c2.Stats().Duplicates == 5
	})
	if got := e.effectCounts(); len(got) != 1 || got[ev.ID] != 1 {
		t.Fatalf("business table after 5 deliveries: %v, want the event applied once", got)
	}
	dups := c.Stats().Duplicates + c2.Stats().Duplicates
	processed := c.Stats().Processed + c2.Stats().Processed
	if dups != 4 || processed != 1 {
		t.Fatalf("duplicates %d processed %d, want 4 and 1", dups, processed)
	}
	if r := e.inboxRow("inventory", ev.ID); r.Status != txbox.StatusProcessed || r.ProcessedAt == nil {
		t.Fatalf("inbox row: %+v", r)
	}
}

func TestFailsTwiceThenSucceeds(t *testing.T) {
	e := newEnv(t)
	ev := txbox.MustEvent("Order", "o-1", "OrderCreated", nil)
	e.write(ev)
	e.relay()
	var calls atomic.Int32
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second)},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			// The failed attempts write too: the rollback must undo them.
			if err := e.applyEffect(ctx, tx, ev); err != nil {
				return err
			}
			if n := calls.Add(1); n <= 2 {
				return fmt.Errorf("stock service timeout #%d", n)
			}
			return nil
		})
	testenv.WaitFor(t, 15*time.Second, "processed", func() bool { return c.Stats().Processed == 1 })
	if got := e.effectCounts(); got[ev.ID] != 1 {
		t.Fatalf("effect applied %d times", got[ev.ID])
	}
	r := e.inboxRow("inventory", ev.ID)
	if r.Status != txbox.StatusProcessed || r.RetryCount != 2 || r.ErrorMessage != "stock service timeout #2" {
		t.Fatalf("inbox row: status %s attempts %d error %q", r.Status, r.RetryCount, r.ErrorMessage)
	}
	if c.Stats().Failed != 2 {
		t.Fatalf("failed counter %d", c.Stats().Failed)
	}
}

func TestAlwaysFailingIsParkedOthersFlowReplayApplies(t *testing.T) {
	e := newEnv(t)
	poison := txbox.MustEvent("Order", "o-1", "OrderCreated", map[string]string{"sku": "broken"})
	var later []txbox.Event
	for i := range 20 {
		later = append(later, txbox.MustEvent("Order", fmt.Sprintf("o-%d", i+2), "OrderCreated", nil))
	}
	e.write(append([]txbox.Event{poison}, later...)...)
	e.relay()
	var fixed atomic.Bool
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second), MaxAttempts: 3},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			if ev.ID == poison.ID && !fixed.Load() {
				return errors.New("unknown sku broken")
			}
			return e.applyEffect(ctx, tx, ev)
		})
	testenv.WaitFor(t, 15*time.Second, "parked and the rest applied", func() bool {
		return c.Stats().Parked == 1 && c.Stats().Processed == 20
	})
	r := e.inboxRow("inventory", poison.ID)
	if r.Status != txbox.StatusDead || r.RetryCount != 3 || r.ErrorMessage != "unknown sku broken" || string(r.Event.Payload) != string(poison.Payload) {
		t.Fatalf("parked row: %+v", r)
	}
	if got := e.effectCounts(); got[poison.ID] != 0 || len(got) != 20 {
		t.Fatalf("effects: %v", got)
	}

	// The handler is fixed; the operator replays the parked event.
	fixed.Store(true)
	tb := e.s.Tables()
	out, err := runCLI(t, "inbox", "replay", "--db", testenv.URL(t, "TXBOX_TEST_POSTGRES"), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox,
		"--consumer", "inventory", "--event-id", poison.ID)
	if err != nil || !strings.Contains(out, "replay requested for 1") {
		t.Fatalf("txbox inbox replay: %v\n%s", err, out)
	}
	testenv.WaitFor(t, time.Minute, "replayed", func() bool { return c.Stats().Replayed == 1 })
	if got := e.effectCounts(); got[poison.ID] != 1 {
		t.Fatalf("replayed event applied %d times", got[poison.ID])
	}
	if r := e.inboxRow("inventory", poison.ID); r.Status != txbox.StatusProcessed {
		t.Fatalf("after replay: %s", r.Status)
	}
}

func TestVersionGuardSkipsStale(t *testing.T) {
	e := newEnv(t)
	v5, v3, v6 := orderUpdated("o-1", 5), orderUpdated("o-1", 3), orderUpdated("o-1", 6)
	// The relay keeps outbox order, so the stale order is made the way a
	// producer bug or a manual republish would: v5 is written first.
	e.write(v5, v3, v6)
	e.relay()
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second), VersionGuard: true}, e.applyEffect)
	testenv.WaitFor(t, time.Minute, "three handled", func() bool { return c.Stats().Processed+c.Stats().Stale == 3 })
	if c.Stats().Stale != 1 || c.Stats().Processed != 2 {
		t.Fatalf("stale %d processed %d", c.Stats().Stale, c.Stats().Processed)
	}
	got := e.effectCounts()
	if got[v3.ID] != 0 || got[v5.ID] != 1 || got[v6.ID] != 1 {
		t.Fatalf("effects: %v", got)
	}
	r := e.inboxRow("inventory", v3.ID)
	if r.Status != txbox.StatusSkipped || !strings.Contains(r.ErrorMessage, "version 3 is not above the last applied 5") {
		t.Fatalf("stale row: %+v", r)
	}
}

func TestUndecodableMessageParkedNotLost(t *testing.T) {
	e := newEnv(t)
	js := e.js
	ctx := context.Background()
	// Not a CloudEvent at all, then a CloudEvent without an id, then a good one.
	if _, err := js.Publish(ctx, e.prefix+".junk", []byte("\xff\xfe not json")); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(e.prefix + ".Order.X")
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-type", "X")
	m.Data = []byte(`{}`)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	good := txbox.MustEvent("Order", "o-1", "OrderCreated", nil)
	e.write(good)
	e.relay()
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second)}, e.applyEffect)
	testenv.WaitFor(t, time.Minute, "good event after the junk", func() bool { return c.Stats().Processed == 1 })
	if c.Stats().Undecodable != 2 {
		t.Fatalf("undecodable %d", c.Stats().Undecodable)
	}
	rows, err := e.s.InboxList(ctx, store.InboxFilter{Consumer: "inventory", Status: txbox.StatusDead})
	if err != nil || len(rows) != 2 {
		t.Fatalf("parked junk: %v %d", err, len(rows))
	}
	for _, r := range rows {
		if r.EventType != store.UndecodableType || !strings.HasPrefix(r.ErrorMessage, "undecodable:") || len(r.Event.Payload) == 0 {
			t.Fatalf("parked junk row: %+v", r)
		}
	}
	if n, _ := e.s.InboxReplay(ctx, store.InboxFilter{Consumer: "inventory"}); n != 0 {
		t.Fatalf("undecodable rows must not be replayable: %d", n)
	}
}

func TestTwoConsumerNamesEachApplyOnce(t *testing.T) {
	e := newEnv(t)
	e.write(testenv.Backlog(200, 10, "OrderCreated")...)
	e.relay()
	counts := map[string]*atomic.Int32{"inventory": {}, "billing": {}}
	for name, n := range counts {
		e.consumer(inbox.Config{Name: name, Subscriber: e.subscriber(name, 30*time.Second)}, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			_, err := tx.Exec(ctx, e.effects.Upsert, name+":"+ev.ID)
			n.Add(1)
			return err
		})
	}
	testenv.WaitFor(t, 20*time.Second, "both consumers done", func() bool { return counts["inventory"].Load() >= 200 && counts["billing"].Load() >= 200 })
	time.Sleep(200 * time.Millisecond)
	got := e.appliedOnce()
	if len(got) != 400 {
		t.Fatalf("%d effects, want 200 per consumer", len(got))
	}
	ic, err := e.s.InboxCounts(context.Background())
	if err != nil || ic["inventory"][txbox.StatusProcessed] != 200 || ic["billing"][txbox.StatusProcessed] != 200 {
		t.Fatalf("inbox rows per consumer: %v %v", ic, err)
	}
}

func TestRetentionBelowFloorRefused(t *testing.T) {
	cfg := inbox.Config{MaxAttempts: 10}
	r := inbox.Retention{Keep: 3 * 24 * time.Hour, BrokerHorizon: 72 * time.Hour, RetryWindow: cfg.RetryWindow()}
	err := r.Validate()
	if !errors.Is(err, inbox.ErrRetentionTooShort) {
		t.Fatalf("3 days accepted: %v", err)
	}
	for _, want := range []string{"redelivery horizon (72h0m0s)", "retry window", "manual repair window", "outlive every redelivery"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message does not explain %q: %v", want, err)
		}
	}
	// Over the floor but under horizon + retry + manual: still refused.
	if err := (inbox.Retention{Keep: 8 * 24 * time.Hour, BrokerHorizon: 7 * 24 * time.Hour, RetryWindow: time.Hour}).Validate(); err == nil {
		t.Fatal("8 days with a 7-day broker horizon accepted")
	}
	if err := (inbox.Retention{Keep: 7 * 24 * time.Hour, RetryWindow: cfg.RetryWindow()}).Validate(); err != nil {
		t.Fatalf("7 days with no broker horizon refused: %v", err)
	}
	if w := cfg.RetryWindow(); w != 511*time.Second {
		t.Fatalf("default retry window %v, want 511s (nine waits: 1+2+...+256s)", w)
	}
}

func pgURL(t *testing.T) string { return testenv.URL(t, "TXBOX_TEST_POSTGRES") }

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return scenario.RunCmd(t, testenv.Binary(t), args...)
}

// Ordered mode: versions 1, 3, 2 of an aggregate arrive in that order (a
// redelivery overtaken by its successor); the consumer applies 1, 2, 3.
func TestOrderedAppliesInVersionOrder(t *testing.T) {
	e := newEnv(t)
	// Written in this order on purpose; the relay keeps outbox order.
	mk := orderUpdated
	e.write(mk("o-1", 1), mk("o-1", 3), mk("o-2", 1), mk("o-1", 2), mk("o-2", 2))
	e.relay()
	var mu sync.Mutex
	var applied []string
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second), VersionGuard: true, Ordered: true},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			mu.Lock()
			applied = append(applied, fmt.Sprintf("%s/%d", ev.AggregateID, ev.AggregateVersion))
			mu.Unlock()
			return e.applyEffect(ctx, tx, ev)
		})
	testenv.WaitFor(t, 15*time.Second, "five applied", func() bool { return c.Stats().Processed == 5 })
	mu.Lock()
	defer mu.Unlock()
	var o1 []string
	for _, a := range applied {
		if strings.HasPrefix(a, "o-1/") {
			o1 = append(o1, a)
		}
	}
	if strings.Join(o1, ",") != "o-1/1,o-1/2,o-1/3" {
		t.Fatalf("aggregate o-1 applied as %v (all handler calls: %v)", o1, applied)
	}
	if c.Stats().Held == 0 || c.Stats().Stale != 0 {
		t.Fatalf("held %d stale %d", c.Stats().Held, c.Stats().Stale)
	}
	e.appliedOnce()
}

// TxBatch: many deliveries in one transaction, each under a savepoint. A
// handler that fails (after writing) is rolled back alone and retried; one
// that always fails is parked; the others commit once each.
func TestSharedTransactionSavepoints(t *testing.T) {
	e := newEnv(t)
	evs := testenv.Backlog(60, 60, "OrderCreated")
	flaky, poison := evs[10], evs[20]
	e.write(evs...)
	e.relay()
	var flakyCalls atomic.Int32
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", 30*time.Second), TxBatch: 25, MaxAttempts: 3},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			if err := e.applyEffect(ctx, tx, ev); err != nil {
				return err
			}
			switch {
			case ev.ID == poison.ID:
				return errors.New("always fails")
			case ev.ID == flaky.ID && flakyCalls.Add(1) <= 2:
				return errors.New("fails twice")
			}
			return nil
		})
	testenv.WaitFor(t, 20*time.Second, "59 applied and one parked", func() bool {
		return c.Stats().Processed == 59 && c.Stats().Parked == 1
	})
	got := e.appliedOnce()
	if len(got) != 59 || got[poison.ID] != 0 || got[flaky.ID] != 1 {
		t.Fatalf("effects: %d rows, poison %d, flaky %d", len(got), got[poison.ID], got[flaky.ID])
	}
	if r := e.inboxRow("inventory", flaky.ID); r.Status != txbox.StatusProcessed || r.RetryCount != 2 {
		t.Fatalf("flaky row: %+v", r)
	}
}
