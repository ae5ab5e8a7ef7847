package brokertest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
)

var seq atomic.Int64

// event returns a valid event for key; n is carried in the payload so order
// and identity can be checked on the other side.
func event(key string, n int) txbox.Event {
	return txbox.Event{
		ID:               txbox.NewID(),
		Type:             "Created",
		AggregateType:    "Order",
		AggregateID:      key,
		AggregateVersion: int64(n + 1),
		OccurredAt:       time.Now().UTC(),
		Payload:          fmt.Appendf(nil, `{"key":%q,"n":%d}`, key, n),
	}
}

func message(topic string, e txbox.Event) broker.Message {
	return broker.Message{Event: e, Topic: topic, Source: "brokertest"}
}

func publisher(t *testing.T, h Harness) broker.Publisher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	p := h.NewPublisher(ctx, t)
	closeAtEnd(t, p, "Publisher")
	return p
}

// subscriber returns a receiver on topic, or skips the test when the
// harness has none.
func subscriber(t *testing.T, h Harness, group, topic string) broker.Subscriber {
	t.Helper()
	if h.NewSubscriber == nil {
		t.Skip("skipped: Harness.NewSubscriber is nil (adapter has no subscriber)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s := h.NewSubscriber(ctx, t, group, topic)
	closeAtEnd(t, s, "Subscriber")
	return s
}

// closeAtEnd fails the test when Harness.New<kind> returned nil, and
// closes c when the test ends.
func closeAtEnd(t *testing.T, c io.Closer, kind string) {
	t.Helper()
	if c == nil {
		t.Fatalf("Harness.New%s returned nil", kind)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("%s Close: %v", strings.ToLower(kind), err)
		}
	})
}

// needs starts a case that needs the capability what, which has reads: a
// publisher, a fresh topic and a subscriber of a new group on it. The case
// is skipped when the adapter does not declare the capability.
func needs(t *testing.T, h Harness, what string, has func(Capabilities) bool) (broker.Publisher, string, broker.Subscriber) {
	t.Helper()
	p := publisher(t, h)
	if !has(h.caps(p)) {
		t.Skip("skipped: adapter does not declare " + what)
	}
	topic := h.Topic(t)
	return p, topic, subscriber(t, h, group(), topic)
}

func group() string { return newGroup() }

func newGroup() string {
	return fmt.Sprintf("bt%d", seq.Add(1))
}

// publish publishes msgs within opTimeout and returns one result per
// message, failing the test when the publisher returned another count.
func publish(t *testing.T, p broker.Publisher, msgs []broker.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(msgs))
	}
	return errs
}

// publishOK publishes msgs and fails the test unless every one is confirmed.
func publishOK(t *testing.T, p broker.Publisher, msgs []broker.Message) {
	t.Helper()
	for i, err := range publish(t, p, msgs) {
		if err != nil {
			t.Fatalf("Publish message %d (%s on %q): %v", i, msgs[i].Event.ID, msgs[i].Topic, err)
		}
	}
}

// startPublish publishes the calls one after the other. For a Synchronous
// harness it does so in the background, and wait reports the results once
// the subscriber settled them; otherwise every call is confirmed before it
// returns and wait returns at once. wait fails the test if a call did not
// confirm every message, unless keep is set: then the results are returned.
func startPublish(t *testing.T, h Harness, p broker.Publisher, calls ...[]broker.Message) (wait func(keep bool) [][]error) {
	t.Helper()
	if !h.Synchronous {
		for _, msgs := range calls {
			publishOK(t, p, msgs)
		}
		return func(bool) [][]error { return nil }
	}
	done := make(chan [][]error, 1)
	go func() {
		var all [][]error
		for _, msgs := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			all = append(all, p.Publish(ctx, msgs))
			cancel()
		}
		done <- all
	}()
	return func(keep bool) [][]error {
		t.Helper()
		all := <-done
		if keep {
			return all
		}
		for c, errs := range all {
			if len(errs) != len(calls[c]) {
				t.Fatalf("Publish returned %d results for %d messages", len(errs), len(calls[c]))
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Publish call %d message %d (%s on %q): %v", c, i, calls[c][i].Event.ID, calls[c][i].Topic, err)
				}
			}
		}
		return all
	}
}

// receive collects n deliveries, acking each as it arrives when ack is
// set, and fails the test if they do not arrive within opTimeout.
func receive(t *testing.T, s broker.Subscriber, n int, ack bool) []broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var each func(broker.Delivery)
	if ack {
		each = func(d broker.Delivery) {
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
	return adaptertest.Receive(ctx, t, s, n, each)
}

func decode(t *testing.T, d broker.Delivery) txbox.Event {
	t.Helper()
	e, err := d.Event()
	if err != nil {
		t.Fatalf("Delivery.Event of %+v: %v", d.Raw(), err)
	}
	return e
}
