// Package brokertest is the conformance suite every broker adapter passes,
// in the manner of go-cloud's pubsub drivertest and watermill's pubsub tests:
// one set of cases, run against each adapter through a Harness.
//
// The suite runs what an adapter's Harness declares in its Capabilities and
// what the Harness can do; every case it cannot run is skipped with the reason, never
// silently. A bug fixed in one adapter becomes a case here so every adapter
// proves it.
package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// Harness connects the suite to one adapter. Func fields left nil mean "not
// supported"; the cases that need them are skipped with a logged reason.
type Harness struct {
	// NewPublisher returns a publisher for the broker under test. The suite
	// closes it.
	NewPublisher func(ctx context.Context, t *testing.T) broker.Publisher

	// Capabilities declares what the broker guarantees for a publisher
	// NewPublisher returned (some depend on its options or on the server).
	// Required.
	Capabilities func(p broker.Publisher) Capabilities

	// NewSubscriber returns a receiver for the durable group (consumer name)
	// on topic, which came from Topic. The suite closes it. Nil when the
	// adapter cannot receive.
	NewSubscriber func(ctx context.Context, t *testing.T, group, topic string) broker.Subscriber

	// Topic returns a fresh destination, unique per call, that the
	// publisher can deliver to.
	Topic func(t *testing.T) string

	// InvalidTopics are destinations the broker rejects; publishing to each
	// must fail with txbox.ErrPermanent while the other messages of the call
	// succeed. Empty when the adapter cannot tell (the case is skipped).
	InvalidTopics []string

	// AckWait is the ack wait of the harness's subscribers. When > 0 the
	// suite checks that a delivery never acknowledged comes back after it.
	// Keep it short (about a second).
	AckWait time.Duration

	// StopBroker makes the broker unreachable (kills it); StartBroker brings
	// it back with its stored messages. Both nil when the harness cannot do
	// that.
	StopBroker  func(t *testing.T)
	StartBroker func(t *testing.T)

	// PublishRaw publishes a message bypassing the adapter's encoding, as a
	// foreign producer would. Nil when the harness cannot.
	PublishRaw func(ctx context.Context, t *testing.T, topic string, headers map[string]string, body []byte)

	// SubscribeFirst: the broker keeps a message only for the subscriptions
	// that exist when it is published (MQTT). The broker-down case then
	// makes its durable subscription before publishing the message that
	// must survive the restart, and reads it with the same group after.
	SubscribeFirst bool

	// Synchronous: Publish returns only once a subscriber settled the
	// message (HTTP webhooks, where the response is the consumer's
	// verdict). The suite then publishes while it receives, and a Nak'd
	// message must fail its Publish with a retryable error; the suite
	// publishes it again, as the relay would, and that is its redelivery.
	// Topics without a subscriber must confirm at once.
	Synchronous bool
}

// Timeouts, generous for a loaded CI machine and still far below the test
// deadline.
const (
	opTimeout     = 10 * time.Second // one Publish or Receive that must succeed
	quietPeriod   = 500 * time.Millisecond
	downDeadline  = 3 * time.Second  // Publish against a stopped broker
	recoverWithin = 30 * time.Second // publish succeeds again after restart
)

// Run runs every case against the harness.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewPublisher == nil || h.Topic == nil || h.Capabilities == nil {
		t.Fatal("brokertest: Harness.NewPublisher, Harness.Topic and Harness.Capabilities are required")
	}
	cases := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"PublishConfirms", testPublishConfirms},
		{"CanceledContext", testCanceledContext},
		{"PublishReceive", testPublishReceive},
		{"HeaderRoundTrip", testHeaderRoundTrip},
		{"OrderPerKey", testOrderPerKey},
		{"NativeDedupe", testNativeDedupe},
		{"PermanentOversize", testOversize},
		{"PermanentInvalidTopic", testInvalidTopic},
		{"ReceiveHonoursContext", testReceiveContext},
		{"RedeliveryNak", testRedeliveryNak},
		{"RedeliveryAckWait", testRedeliveryAckWait},
		{"UndecodableMessage", testUndecodable},
		{"BrokerDown", testBrokerDown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

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
	if p == nil {
		t.Fatal("Harness.NewPublisher returned nil")
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("publisher Close: %v", err)
		}
	})
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
	if s == nil {
		t.Fatal("Harness.NewSubscriber returned nil")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("subscriber Close: %v", err)
		}
	})
	return s
}

func group() string { return newGroup() }

func newGroup() string {
	return fmt.Sprintf("bt%d", seq.Add(1))
}

// publishOK publishes msgs and fails the test unless every one is confirmed.
func publishOK(t *testing.T, p broker.Publisher, msgs []broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(msgs))
	}
	for i, err := range errs {
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

// receive collects n deliveries, acking each unless keep is set, and fails
// the test if they do not arrive within opTimeout.
func receive(t *testing.T, s broker.Subscriber, n int, ack bool) []broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var got []broker.Delivery
	for len(got) < n {
		ds, err := s.Receive(ctx, n-len(got))
		if err != nil {
			t.Fatalf("Receive after %d of %d deliveries: %v", len(got), n, err)
		}
		if len(ds) == 0 {
			t.Fatal("Receive returned no deliveries and no error")
		}
		if len(ds) > n-len(got) {
			t.Fatalf("Receive(max=%d) returned %d deliveries", n-len(got), len(ds))
		}
		for _, d := range ds {
			if ack {
				if err := d.Ack(ctx); err != nil {
					t.Fatalf("Ack: %v", err)
				}
			}
		}
		got = append(got, ds...)
	}
	return got
}

// expectQuiet fails the test if anything is delivered within d.
func expectQuiet(t *testing.T, s broker.Subscriber, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := s.Receive(ctx, 10)
	if err == nil {
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.Raw().ID)
		}
		t.Fatalf("%s, but received %d more: %v", why, len(ds), ids)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive while waiting for silence: %v", err)
	}
}

func decode(t *testing.T, d broker.Delivery) txbox.Event {
	t.Helper()
	e, err := d.Event()
	if err != nil {
		t.Fatalf("Delivery.Event of %+v: %v", d.Raw(), err)
	}
	return e
}

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
	expectQuiet(t, s, quietPeriod, "all messages were received and acked")
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

// testOrderPerKey: 200 messages over 5 keys, published in four calls,
// arrive in publish order per key.
func testOrderPerKey(t *testing.T, h Harness) {
	p := publisher(t, h)
	if !h.caps(p).OrderPerKey {
		t.Skip("skipped: adapter does not declare OrderPerKey")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	const total, keys, calls = 200, 5, 4
	order := map[string]int{} // event id -> position within its key
	var all []broker.Message
	for i := range total {
		k := fmt.Sprintf("agg-%d", i%keys)
		e := event(k, i)
		order[e.ID] = i / keys
		all = append(all, message(topic, e))
	}
	var parts [][]broker.Message
	for c := range calls {
		parts = append(parts, all[c*total/calls:(c+1)*total/calls])
	}
	wait := startPublish(t, h, p, parts...)
	last := map[string]int{}
	for _, d := range receive(t, s, total, true) {
		e := decode(t, d)
		pos, ok := order[e.ID]
		if !ok {
			t.Fatalf("unknown event %s", e.ID)
		}
		if prev, seen := last[e.AggregateID]; seen && pos <= prev {
			t.Fatalf("key %s: message #%d arrived after #%d", e.AggregateID, pos, prev)
		}
		last[e.AggregateID] = pos
	}
	wait(false)
	for k, pos := range last {
		if pos != total/keys-1 {
			t.Errorf("key %s: last message #%d, want #%d", k, pos, total/keys-1)
		}
	}
}

// testNativeDedupe: publishing the same event id twice is confirmed both
// times and stored once.
func testNativeDedupe(t *testing.T, h Harness) {
	p := publisher(t, h)
	if !h.caps(p).NativeDedupe {
		t.Skip("skipped: adapter does not declare NativeDedupe")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	dup := event("k", 0)
	marker := event("k", 1)
	publishOK(t, p, []broker.Message{message(topic, dup)})
	publishOK(t, p, []broker.Message{message(topic, dup), message(topic, marker)})
	ds := receive(t, s, 2, true)
	if a, b := decode(t, ds[0]).ID, decode(t, ds[1]).ID; a != dup.ID || b != marker.ID {
		t.Fatalf("received %s, %s; want %s once then %s", a, b, dup.ID, marker.ID)
	}
	expectQuiet(t, s, quietPeriod, "the duplicate must not be stored")
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

func checkOnlyFails(t *testing.T, p broker.Publisher, msgs []broker.Message, bad int, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(msgs))
	}
	for i, err := range errs {
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

// testReceiveContext: Receive with nothing to deliver returns the context's
// error when it ends, promptly.
func testReceiveContext(t *testing.T, h Harness) {
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	ds, err := s.Receive(ctx, 5)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive on an empty topic = %d deliveries, %v; want context.DeadlineExceeded", len(ds), err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Receive returned %v after its context ended", el-300*time.Millisecond)
	}
}

// testRedeliveryNak: a Nak'd delivery comes back no sooner than its delay,
// with a higher attempt; an acked one never does.
func testRedeliveryNak(t *testing.T, h Harness) {
	p := publisher(t, h)
	if !h.caps(p).Redelivery {
		t.Skip("skipped: adapter does not declare Redelivery")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	acked, naked := event("a", 0), event("b", 1)
	wait := startPublish(t, h, p, []broker.Message{message(topic, acked), message(topic, naked)})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	const delay = 500 * time.Millisecond
	var nakAt time.Time
	var firstAttempt int
	for _, d := range receive(t, s, 2, false) {
		switch e := decode(t, d); e.ID {
		case acked.ID:
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		case naked.ID:
			firstAttempt = d.Attempt()
			nakAt = time.Now()
			if err := d.Nak(ctx, delay); err != nil {
				t.Fatalf("Nak: %v", err)
			}
		default:
			t.Fatalf("unexpected event %s", e.ID)
		}
	}
	if h.Synchronous {
		// The Nak is the sender's answer: a retryable failure. Its retry,
		// which the relay would make, is the redelivery.
		errs := wait(true)[0]
		if errs[0] != nil {
			t.Fatalf("Publish of the acked message: %v", errs[0])
		}
		if errs[1] == nil || errors.Is(errs[1], txbox.ErrPermanent) {
			t.Fatalf("Publish of the Nak'd message: err = %v, want a retryable error", errs[1])
		}
		t.Logf("Nak'd message, as the sender saw it: %v", errs[1])
		wait = startPublish(t, h, p, []broker.Message{message(topic, naked)})
	}
	d := receive(t, s, 1, false)[0]
	if e := decode(t, d); e.ID != naked.ID {
		t.Fatalf("redelivered %s, want the Nak'd %s (the acked one must not come back)", e.ID, naked.ID)
	}
	if el := time.Since(nakAt); el < delay*8/10 && !h.Synchronous {
		t.Errorf("Nak'd delivery came back after %v, before its delay of %v", el, delay)
	}
	if a := d.Attempt(); a != 0 && a <= firstAttempt {
		t.Errorf("redelivery Attempt() = %d, want more than the first %d", a, firstAttempt)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack of the redelivery: %v", err)
	}
	wait(false)
	expectQuiet(t, s, quietPeriod, "both messages were acked")
}

// testRedeliveryAckWait: a delivery neither acked nor Nak'd comes back
// after the ack wait.
func testRedeliveryAckWait(t *testing.T, h Harness) {
	p := publisher(t, h)
	if !h.caps(p).Redelivery {
		t.Skip("skipped: adapter does not declare Redelivery")
	}
	if h.AckWait <= 0 {
		t.Skip("skipped: Harness.AckWait is 0 (subscriber ack wait unknown or too long to wait for)")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	e := event("k", 0)
	publishOK(t, p, []broker.Message{message(topic, e)})
	first := receive(t, s, 1, false)[0]
	start := time.Now()
	again := receive(t, s, 1, true)[0]
	if got := decode(t, again); got.ID != e.ID {
		t.Fatalf("redelivered %s, want %s", got.ID, e.ID)
	}
	if el := time.Since(start); el < h.AckWait*8/10 {
		t.Errorf("unacked delivery came back after %v, before the ack wait %v", el, h.AckWait)
	}
	if a, b := first.Attempt(), again.Attempt(); b != 0 && b <= a {
		t.Errorf("redelivery Attempt() = %d, want more than %d", b, a)
	}
	expectQuiet(t, s, quietPeriod, "the redelivery was acked")
}

type rawMsg struct {
	headers map[string]string
	body    []byte
}

// testUndecodable: a message that is not a txbox CloudEvent is delivered,
// its decode error is permanent, and Raw keeps what is needed to park it.
func testUndecodable(t *testing.T, h Harness) {
	if h.PublishRaw == nil {
		t.Skip("skipped: Harness.PublishRaw is nil (cannot publish a foreign message)")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	raws := []rawMsg{
		{map[string]string{"x-foreign": "yes"}, []byte("plain text, not a CloudEvent")},
		{map[string]string{"ce-specversion": "1.0", "ce-type": "NoID", "ce-source": "s"}, []byte(`{}`)},
		{map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-type": "BadTime", "ce-time": "yesterday"}, []byte(`{}`)},
	}
	for _, r := range raws {
		h.PublishRaw(ctx, t, topic, r.headers, r.body)
	}
	seen := map[int]bool{}
	for _, d := range receive(t, s, len(raws), false) {
		raw := d.Raw()
		i := slices.IndexFunc(raws, func(r rawMsg) bool {
			return bytes.Equal(r.body, raw.Body) && r.headers["ce-type"] == raw.Headers["ce-type"]
		})
		if i < 0 || seen[i] {
			t.Fatalf("received unknown or repeated raw message %+v", raw)
		}
		seen[i] = true
		_, err := d.Event()
		if !errors.Is(err, txbox.ErrPermanent) {
			t.Errorf("raw message %d: Event() err = %v, want one wrapping txbox.ErrPermanent", i, err)
		}
		if raw.Topic != topic {
			t.Errorf("raw message %d: Raw().Topic = %q, want %q", i, raw.Topic, topic)
		}
		for k, v := range raws[i].headers {
			if raw.Headers[k] != v {
				t.Errorf("raw message %d: Raw().Headers[%q] = %q, want %q", i, k, raw.Headers[k], v)
			}
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

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
