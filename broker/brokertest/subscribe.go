package brokertest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
)

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
	p, topic, s := needs(t, h, "Redelivery", func(c Capabilities) bool { return c.Redelivery })
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
	adaptertest.Silent(t, s, quietPeriod, "both messages were acked")
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
	adaptertest.Silent(t, s, quietPeriod, "the redelivery was acked")
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

// testAsyncAck: a delivery acknowledged with AckAsync (broker.AsyncAcker,
// the inbox's fast path after its commit) is not delivered again, not even
// after the ack wait, and the next message still arrives. Adapters whose
// deliveries lack AckAsync skip it.
func testAsyncAck(t *testing.T, h Harness) {
	p := publisher(t, h)
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	first, second := event("k", 0), event("k", 1)
	wait := startPublish(t, h, p, []broker.Message{message(topic, first)})
	d := receive(t, s, 1, false)[0]
	a, ok := d.(broker.AsyncAcker)
	if !ok {
		_ = d.Ack(context.Background())
		wait(false)
		t.Skipf("skipped: %T does not implement broker.AsyncAcker", d)
	}
	if e := decode(t, d); e.ID != first.ID {
		t.Fatalf("received %s, want %s", e.ID, first.ID)
	}
	if err := a.AckAsync(); err != nil {
		t.Fatalf("AckAsync: %v", err)
	}
	wait(false)
	quiet := quietPeriod
	if h.AckWait > 0 {
		quiet += h.AckWait
	}
	adaptertest.Silent(t, s, quiet, "the delivery was acknowledged with AckAsync")
	wait = startPublish(t, h, p, []broker.Message{message(topic, second)})
	if e := decode(t, receive(t, s, 1, true)[0]); e.ID != second.ID {
		t.Fatalf("after an AckAsync received %s, want the next message %s", e.ID, second.ID)
	}
	wait(false)
}

// staleHold is how long the stale-delivery case holds a delivery before the
// next step: the NATS adapter tells a durable consumer made again by a
// creation time compared to the second, and settles a delivery older than
// a second only after asking.
const staleHold = 1500 * time.Millisecond

// testStaleDelivery: a delivery taken before its destination was deleted
// and made again (an operator re-creating a stream, topic or queue)
// settles nothing of the new destination. JetStream settles an ack by the
// message's stream sequence alone: the NATS adapter's ack of such a
// delivery, sent after another process had made the durable consumer
// again, settled the new stream's message with the same sequence, which
// then never came (the fault harness lost events so: an Ordered inbox
// holds deliveries for a while). Subscriber A takes m1 and holds it; the
// destination is made again; m2, published to it, is taken and held by
// subscriber B of the same group; A's stale delivery is settled every way
// it can be (its errors are allowed); B's Nak must still bring m2 back.
func testStaleDelivery(t *testing.T, h Harness) {
	if h.RecreateDestination == nil {
		t.Skip("skipped: Harness.RecreateDestination is nil (broker has no destination holding messages to delete and make again)")
	}
	if h.Synchronous {
		t.Fatal("Harness.RecreateDestination is set on a Synchronous harness, which holds no messages to delete")
	}
	p := publisher(t, h)
	if !h.caps(p).Redelivery {
		t.Skip("skipped: adapter does not declare Redelivery")
	}
	topic := h.Topic(t)
	g := group()
	m1, m2 := event("k", 0), event("k", 1)
	a := subscriber(t, h, g, topic)
	publishOK(t, p, []broker.Message{message(topic, m1)})
	stale := receiveID(t, a, m1.ID, "subscriber A")
	time.Sleep(staleHold)

	h.RecreateDestination(t, topic)
	publishAgain(t, p, message(topic, m2))
	b := subscriber(t, h, g, topic)
	current := receiveID(t, b, m2.ID, "subscriber B, of the destination made again,")
	time.Sleep(staleHold) // both held past a quick settle

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if aa, ok := stale.(broker.AsyncAcker); ok {
		t.Logf("AckAsync of the stale delivery: %v", aa.AckAsync())
	}
	t.Logf("Ack of the stale delivery: %v", stale.Ack(ctx))
	t.Logf("Nak of the stale delivery: %v", stale.Nak(ctx, 0))
	time.Sleep(quietPeriod) // an ack sent without a confirm has landed by now

	if err := current.Nak(ctx, 0); err != nil {
		if h.AckWait <= 0 || h.AckWait >= staleHold {
			t.Fatalf("Nak of m2, the destination's current message: %v", err)
		}
		// Held past the ack wait, it may have been handed out again
		// already: it must come back all the same.
		t.Logf("Nak of m2, held past the ack wait of %v: %v", h.AckWait, err)
	}
	again := receiveID(t, b, m2.ID, "after its Nak, subscriber B (a stale settle that settled m2 in its place keeps it away)")
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("Ack of m2 delivered again: %v", err)
	}
}

// receiveID takes the next delivery from s, which must be of event id,
// within opTimeout; an outage Receive reports (a subscriber finding its
// destination made again) is waited out.
func receiveID(t *testing.T, s broker.Subscriber, id, who string) broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		ds, err := s.Receive(ctx, 1)
		if errors.Is(err, txbox.ErrBrokerUnavailable) && ctx.Err() == nil {
			t.Logf("%s: Receive: %v (trying again)", who, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("%s did not receive %s within %v: %v", who, id, opTimeout, err)
		}
		if len(ds) != 1 {
			t.Fatalf("%s: Receive(max=1) returned %d deliveries", who, len(ds))
		}
		if e := decode(t, ds[0]); e.ID != id {
			t.Fatalf("%s received %s, want %s", who, e.ID, id)
		}
		return ds[0]
	}
}

// publishAgain publishes m to a destination just made again, retrying
// outages as the relay would (a publisher may learn the new destination
// only from a failed publish) for up to recoverWithin.
func publishAgain(t *testing.T, p broker.Publisher, m broker.Message) {
	t.Helper()
	deadline := time.Now().Add(recoverWithin)
	for attempt := 1; ; attempt++ {
		err := publish(t, p, []broker.Message{m})[0]
		if err == nil {
			if attempt > 1 {
				t.Logf("published to the destination made again at attempt %d", attempt)
			}
			return
		}
		if errors.Is(err, txbox.ErrPermanent) || time.Now().After(deadline) {
			t.Fatalf("publish %s to the destination made again, attempt %d: %v", m.Event.ID, attempt, err)
		}
		t.Logf("publish to the destination made again, attempt %d: %v", attempt, err)
		time.Sleep(200 * time.Millisecond)
	}
}
