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
	expectQuiet(t, s, quiet, "the delivery was acknowledged with AckAsync")
	wait = startPublish(t, h, p, []broker.Message{message(topic, second)})
	if e := decode(t, receive(t, s, 1, true)[0]); e.ID != second.ID {
		t.Fatalf("after an AckAsync received %s, want the next message %s", e.ID, second.ID)
	}
	wait(false)
}
