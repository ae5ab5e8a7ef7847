package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
)

// testPublishConfirms: one result per message, all confirmed, in order of
// the slice; an empty call returns an empty result.
func testPublishConfirms(t *testing.T, h Harness) {
	p := publisher(t, h)
	if errs := p.Publish(context.Background(), nil); len(errs) != 0 {
		t.Fatalf("Publish(nil) = %v, want no results", errs)
	}
	topic := h.Topic(t)
	var msgs []broker.Message
	for i := range 25 {
		msgs = append(msgs, message(topic, event(fmt.Sprintf("k%d", i%3), i)))
	}
	publishOK(t, p, msgs)
}

// testCanceledContext: a call whose context is already over confirms
// nothing and says the broker is unavailable, rather than hanging.
func testCanceledContext(t *testing.T, h Harness) {
	p := publisher(t, h)
	topic := h.Topic(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msgs := []broker.Message{message(topic, event("k", 0)), message(topic, event("k", 1))}
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(msgs))
	}
	for i, err := range errs {
		if !errors.Is(err, txbox.ErrBrokerUnavailable) {
			t.Errorf("message %d with a canceled context: err = %v, want one wrapping txbox.ErrBrokerUnavailable", i, err)
		}
	}
}

// testPublishReceive: every published message arrives once, payload bytes
// unchanged.
func testPublishReceive(t *testing.T, h Harness) {
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	p := publisher(t, h)
	want := map[string][]byte{}
	var msgs []broker.Message
	for i := range 20 {
		e := event(fmt.Sprintf("k%d", i%4), i)
		if i == 7 {
			// Bytes a re-encoding would change: key order, spacing, escapes.
			e.Payload = []byte(`{ "z":1,"a" : [1, 2.50, "\u00e9t\u00e9"], "s":"héllo ✓" }`)
		}
		want[e.ID] = e.Payload
		msgs = append(msgs, message(topic, e))
	}
	wait := startPublish(t, h, p, msgs)
	for _, d := range receive(t, s, len(msgs), true) {
		e := decode(t, d)
		w, ok := want[e.ID]
		if !ok {
			t.Fatalf("received unknown or repeated event %s", e.ID)
		}
		delete(want, e.ID)
		if !bytes.Equal(e.Payload, w) {
			t.Errorf("event %s payload = %q, want %q", e.ID, e.Payload, w)
		}
		if raw := d.Raw(); raw.Topic != topic {
			t.Errorf("event %s Raw().Topic = %q, want %q", e.ID, raw.Topic, topic)
		}
	}
	wait(false)
	adaptertest.Silent(t, s, quietPeriod, "all messages were received and acked")
}

// testHeaderRoundTrip: every field of the envelope survives the wire.
func testHeaderRoundTrip(t *testing.T, h Harness) {
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	p := publisher(t, h)
	want := txbox.Event{
		ID:               txbox.NewID(),
		Type:             "OrderShipped.v2",
		AggregateType:    "Order",
		AggregateID:      "order-42/ß",
		AggregateVersion: 9_000_000_001,
		OccurredAt:       time.Date(2024, 2, 29, 23, 59, 58, 123_456_789, time.FixedZone("CET", 3600)),
		Headers: map[string]string{
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"tracestate":  "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
			"tenant":      "acme",
		},
		Payload: []byte(`{"order":"42","lines":[{"sku":"A-1","qty":2}],"note":"naïve"}`),
	}
	wait := startPublish(t, h, p, []broker.Message{message(topic, want)})
	ds := receive(t, s, 1, true)
	wait(false)
	got := decode(t, ds[0])
	if got.ID != want.ID || got.Type != want.Type || got.AggregateType != want.AggregateType ||
		got.AggregateID != want.AggregateID || got.AggregateVersion != want.AggregateVersion {
		t.Errorf("envelope:\n got %+v\nwant %+v", got, want)
	}
	if d := got.OccurredAt.Sub(want.OccurredAt); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("OccurredAt = %v, want %v (within 1µs)", got.OccurredAt, want.OccurredAt)
	}
	for k, v := range want.Headers {
		if got.Headers[k] != v {
			t.Errorf("header %q = %q, want %q", k, got.Headers[k], v)
		}
	}
	for k, v := range got.Headers {
		if _, ok := want.Headers[k]; !ok {
			t.Errorf("unexpected header %q = %q", k, v)
		}
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Errorf("payload = %q, want %q", got.Payload, want.Payload)
	}
	if a := ds[0].Attempt(); a != 0 && a != 1 {
		t.Errorf("first delivery Attempt() = %d, want 1 (or 0 if unknown)", a)
	}
}

// testOversize: a payload over the declared limit fails permanently, and
// the messages around it in the same call are still confirmed.
func testOversize(t *testing.T, h Harness) {
	p := publisher(t, h)
	limit := h.caps(p).MaxPayload
	if limit <= 0 {
		t.Skip("skipped: adapter declares no MaxPayload")
	}
	topic := h.Topic(t)
	big := event("k", 1)
	big.Payload = append(append([]byte(`"`), bytes.Repeat([]byte("x"), limit)...), '"')
	msgs := []broker.Message{message(topic, event("k", 0)), message(topic, big), message(topic, event("k", 2))}
	checkOnlyFails(t, p, msgs, 1, fmt.Sprintf("payload of %d bytes over MaxPayload %d", len(big.Payload), limit))
}

// testInvalidTopic: each destination the broker rejects fails permanently,
// and the messages around it in the same call are still confirmed.
func testInvalidTopic(t *testing.T, h Harness) {
	if len(h.InvalidTopics) == 0 {
		t.Skip("skipped: Harness.InvalidTopics is empty (adapter cannot detect invalid destinations)")
	}
	p := publisher(t, h)
	topic := h.Topic(t)
	for _, bad := range h.InvalidTopics {
		msgs := []broker.Message{message(topic, event("k", 0)), message(bad, event("k", 1)), message(topic, event("k", 2))}
		checkOnlyFails(t, p, msgs, 1, fmt.Sprintf("invalid topic %q", bad))
	}
}

// testMissingDestination: a publish to a valid destination that does not
// exist fails as an outage, not as a failure of the event, while the
// messages for other destinations in the call are confirmed; once the
// destination is made, the same event is confirmed. A relay that counted
// it as the event's failure would send every event of a deleted stream or
// topic to DEAD at its first attempt.
func testMissingDestination(t *testing.T, h Harness) {
	if h.MissingDestination == nil {
		t.Skip("skipped: Harness.MissingDestination is nil (broker has no destination that can be missing)")
	}
	p := publisher(t, h)
	topic := h.Topic(t)
	missing, create := h.MissingDestination(t)
	lost := message(missing, event("k1", 0))
	msgs := []broker.Message{message(topic, event("k0", 0)), lost, message(topic, event("k2", 0))}
	for i, err := range publish(t, p, msgs) {
		switch {
		case i == 1 && (!errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent)):
			t.Errorf("missing destination %q: err = %v, want one wrapping txbox.ErrBrokerUnavailable and not txbox.ErrPermanent", missing, err)
		case i == 1:
			t.Logf("missing destination %q: %v", missing, err)
		case err != nil:
			t.Errorf("message %d, for an existing destination, next to a missing one: %v, want confirmed", i, err)
		}
	}
	if t.Failed() {
		return
	}

	create(t)
	deadline := time.Now().Add(recoverWithin)
	for attempt := 1; ; attempt++ {
		err := publish(t, p, []broker.Message{lost})[0]
		if err == nil {
			t.Logf("confirmed after the destination was made, at attempt %d", attempt)
			return
		}
		if !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent) {
			t.Fatalf("attempt %d after the destination was made: %v, want confirmed or an outage", attempt, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not confirmed within %v of the destination being made: %v", recoverWithin, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkOnlyFails(t *testing.T, p broker.Publisher, msgs []broker.Message, bad int, what string) {
	t.Helper()
	for i, err := range publish(t, p, msgs) {
		switch {
		case i == bad && !errors.Is(err, txbox.ErrPermanent):
			t.Errorf("%s: err = %v, want one wrapping txbox.ErrPermanent", what, err)
		case i == bad:
			t.Logf("%s: %v", what, err)
		case err != nil:
			t.Errorf("message %d next to %s: %v, want confirmed", i, what, err)
		}
	}
}
