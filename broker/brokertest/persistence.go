package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// testBrokerDown: with the broker stopped, Publish fails with
// txbox.ErrBrokerUnavailable within its deadline; once it is back, the same
// publisher confirms again within a bounded time, by its own reconnection,
// and, if the adapter declares Persistent, what was confirmed before the
// stop is still delivered.
func testBrokerDown(t *testing.T, h Harness) {
	if h.StopBroker == nil || h.StartBroker == nil {
		t.Skip("skipped: Harness.StopBroker/StartBroker are nil (harness cannot stop its broker)")
	}
	p := publisher(t, h)
	topic := h.Topic(t)
	before := event("k", 0)
	var survivor string // the group that must still get before
	if h.SubscribeFirst && h.NewSubscriber != nil && h.caps(p).Persistent {
		survivor = group()
		if err := subscriber(t, h, survivor, topic).Close(); err != nil {
			t.Fatalf("subscriber Close: %v", err)
		}
	}
	publishOK(t, p, []broker.Message{message(topic, before)})

	h.StopBroker(t)
	started := false
	defer func() {
		if !started {
			h.StartBroker(t)
		}
	}()
	// Twice: right after the stop, when the client may not have noticed,
	// and once it is reconnecting, when a client could buffer silently.
	for round, pause := range []time.Duration{0, 300 * time.Millisecond} {
		time.Sleep(pause)
		ctx, cancel := context.WithTimeout(context.Background(), downDeadline)
		msgs := []broker.Message{message(topic, event("k", 1)), message(topic, event("k", 2))}
		start := time.Now()
		errs := p.Publish(ctx, msgs)
		cancel()
		el := time.Since(start)
		if el > downDeadline+time.Second {
			t.Errorf("round %d: Publish with the broker down took %v, past its %v deadline", round, el, downDeadline)
		}
		t.Logf("round %d: with the broker down, Publish returned after %v: %v", round, el.Round(time.Millisecond), errs[0])
		for i, err := range errs {
			if !errors.Is(err, txbox.ErrBrokerUnavailable) {
				t.Errorf("round %d: message %d with the broker down: err = %v, want one wrapping txbox.ErrBrokerUnavailable", round, i, err)
			}
		}
	}

	h.StartBroker(t)
	started = true
	deadline := time.Now().Add(recoverWithin)
	var last error
	for attempt := 1; time.Now().Before(deadline) && attempt <= 300; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs := p.Publish(ctx, []broker.Message{message(topic, event("k", 3))})
		cancel()
		if last = errs[0]; last == nil {
			t.Logf("publishing again after %d attempts", attempt)
			checkSurvived(t, h, p, topic, before.ID, survivor)
			return
		}
		if errors.Is(last, txbox.ErrPermanent) {
			// The relay would send a good row to DEAD for a passing outage.
			t.Fatalf("attempt %d after restart: permanent error for a valid message: %v", attempt, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no publish confirmed within %v of the broker's restart: %v", recoverWithin, last)
}

// checkSurvived: a persistent broker still delivers the message it confirmed
// before it was stopped, to group if given, else to a new group.
func checkSurvived(t *testing.T, h Harness, p broker.Publisher, topic, id, group string) {
	t.Helper()
	if !h.caps(p).Persistent {
		t.Log("not checking that messages survive the restart: adapter does not declare Persistent")
		return
	}
	if h.NewSubscriber == nil {
		t.Log("not checking that messages survive the restart: Harness.NewSubscriber is nil")
		return
	}
	if group == "" {
		group = newGroup()
	}
	s := subscriber(t, h, group, topic)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		ds, err := s.Receive(ctx, 10)
		if err != nil {
			t.Fatalf("the message confirmed before the stop was not delivered after the restart: %v", err)
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			if e, err := d.Event(); err == nil && e.ID == id {
				return
			}
		}
	}
}
