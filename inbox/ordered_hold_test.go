package inbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/testenv"
)

// An Ordered delivery whose predecessor is late is held; the broker hands
// it out again once its ack wait passes. The copy handed out again replaces
// the held one without a nak: on JetStream a nak of the first copy would
// send the very message out once more, and each copy would nak the one
// before it, a loop of redeliveries. The subscriber here hides its ack wait,
// so that HoldFor (5 s) outlasts it (1 s) and copies do come while one is
// held. When the predecessor comes, both are applied once, in order.
func TestOrderedHeldCopyReplacedWithoutChurn(t *testing.T) {
	e := newEnv(t)
	e.write(orderUpdated("o-1", 2))
	e.relay()
	const ackWait = time.Second
	sub := struct{ broker.Subscriber }{e.subscriber("inventory", ackWait)} // no AckWait method
	c := e.consumer(inbox.Config{Name: "inventory", Subscriber: sub, VersionGuard: true, Ordered: true},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error { return e.applyEffect(ctx, tx, ev) })

	time.Sleep(4 * ackWait) // version 2 waits, alone, for four ack waits
	cons, err := e.js.Consumer(context.Background(), e.stream, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A copy per ack wait, replacing the one held: about four. A nak per
	// copy handed out again makes hundreds.
	if n := info.Delivered.Consumer; n > 20 {
		t.Fatalf("version 2 was delivered %d times in %v while it waited for version 1: the held copies churn", n, 4*ackWait)
	} else {
		t.Logf("version 2 delivered %d times in %v while it waited", n, 4*ackWait)
	}
	e.write(orderUpdated("o-1", 1))
	testenv.WaitFor(t, 15*time.Second, "both applied", func() bool { return c.Stats().Processed == 2 })
	e.appliedOnce()
}

// A subscriber that says its ack wait (broker.AckWaiter) lowers an Ordered
// consumer's HoldFor to half of it, with a line that says so.
func TestOrderedHoldForBelowAckWait(t *testing.T) {
	e := newEnv(t)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedBuffer{b: &logs, mu: &logMu}, nil))
	_, err := inbox.New(e.s, inbox.Config{Name: "inventory", Subscriber: e.subscriber("inventory", time.Second), VersionGuard: true, Ordered: true, Logger: logger},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "HoldFor lowered") || !strings.Contains(logs.String(), "hold_for=500ms") {
		t.Fatalf("HoldFor (default %v) was not lowered to half the subscriber's ack wait of 1s; log:\n%s", inbox.DefaultHoldFor, logs.String())
	}
}

type lockedBuffer struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Two processes share an Ordered consumer name and its durable consumer,
// and the broker hands each some of a hot aggregate's events: most events
// wait in one process for a predecessor the other applies. Each process
// looks again at what it holds, so the pair applies the aggregate in order
// about as fast as one process (measured first, in the same run, as the
// yardstick of this machine's speed right now); waiting for HoldFor (5 s
// here) to send the held ones back, it advanced by a few events per HoldFor
// (600 events: 3 s with the recheck, not done in 60 s without, on an idle
// machine).
func TestOrderedSharedNameKeepsUp(t *testing.T) {
	e := newEnv(t)
	const n = 600
	evs := make([]txbox.Event, n)
	for i := range evs {
		evs[i] = txbox.MustEvent("Order", "hot", "OrderUpdated", map[string]int{"version": i + 1})
		evs[i].AggregateVersion = int64(i + 1)
	}
	for i := 0; i < n; i += 100 {
		e.write(evs[i : i+100]...)
	}
	e.relay()
	var mu sync.Mutex
	applied := map[string][]int64{}
	handler := func(name string) func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
		return func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			mu.Lock()
			applied[name] = append(applied[name], ev.AggregateVersion)
			mu.Unlock()
			return nil
		}
	}
	// A small batch, so that the events are spread over both processes.
	cfg := func(name string) inbox.Config {
		return inbox.Config{Name: name, Subscriber: e.subscriber(name, 30*time.Second), VersionGuard: true, Ordered: true, BatchSize: 10}
	}
	count := func(cs ...*inbox.Consumer) func() int {
		return func() int {
			var k int64
			for _, c := range cs {
				k += c.Stats().Processed
			}
			return int(k)
		}
	}

	start := time.Now()
	solo := e.consumer(cfg("solo"), handler("solo"))
	waitProgress(t, "one process", 60*time.Second, 5*time.Minute, n, count(solo))
	alone := time.Since(start)

	start = time.Now()
	a, b := e.consumer(cfg("pair"), handler("pair")), e.consumer(cfg("pair"), handler("pair"))
	// Without the recheck the pair advances a few events per HoldFor:
	// minutes for 600. Loaded (two CPU hogs beside the suite) it took over
	// 2 x alone + 30 s once, hence this looser bound.
	bound := 3*alone + time.Minute
	waitProgress(t, "two processes", bound, bound, n, count(a, b))
	took := time.Since(start)
	t.Logf("%d events of one aggregate: one process %v, two %v (%d and %d; held %d and %d times)",
		n, alone.Round(time.Millisecond), took.Round(time.Millisecond), a.Stats().Processed, b.Stats().Processed, a.Stats().Held, b.Stats().Held)
	mu.Lock()
	defer mu.Unlock()
	for name, vs := range applied {
		for i, v := range vs {
			if v != int64(i+1) {
				t.Fatalf("%s applied out of order: position %d is version %d", name, i, v)
			}
		}
	}
	if a.Stats().Processed == 0 || b.Stats().Processed == 0 {
		t.Logf("one process applied everything: the case did not split the aggregate (%d, %d)", a.Stats().Processed, b.Stats().Processed)
	}
}
