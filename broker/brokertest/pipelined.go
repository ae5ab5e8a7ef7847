package brokertest

import (
	"errors"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
)

// pipelined returns the publisher, or skips the case when the adapter does
// not declare per-key pipelining; a declaration in Capabilities that the
// publisher does not make (or the other way round) fails.
func pipelined(t *testing.T, h Harness) broker.Publisher {
	t.Helper()
	p := publisher(t, h)
	declared := h.caps(p).PipelinesPerKey
	if got := broker.PipelinesPerKey(p); got != declared {
		t.Fatalf("Capabilities.PipelinesPerKey is %v but the publisher's broker.PipelinesPerKey is %v", declared, got)
	}
	if !declared {
		t.Skip("skipped: adapter does not declare PipelinesPerKey")
	}
	return p
}

// keyRun is n messages of one key on topic, in order.
func keyRun(topic string, n int) []broker.Message {
	msgs := make([]broker.Message, n)
	for i := range msgs {
		msgs[i] = message(topic, event("hot", i))
	}
	return msgs
}

// receiveInOrder receives want's messages and fails unless they arrive
// exactly in want's order.
func receiveInOrder(t *testing.T, s broker.Subscriber, want []broker.Message) {
	t.Helper()
	for i, d := range receive(t, s, len(want), true) {
		if e := decode(t, d); e.ID != want[i].Event.ID {
			t.Fatalf("delivery %d is %s (payload %s), want %s", i, e.ID, e.Payload, want[i].Event.ID)
		}
	}
}

// testPipelinedOneKey: 500 messages of one key in one call, all in flight
// at once, are confirmed and arrive in order.
func testPipelinedOneKey(t *testing.T, h Harness) {
	p := pipelined(t, h)
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	msgs := keyRun(topic, 500)
	publishOK(t, p, msgs)
	receiveInOrder(t, s, msgs)
}

// testPipelinedFailure: the broker fails a publish in the middle of a run
// of one key. Every message after the first failure must be unconfirmed and
// unstored (no gap: the stream holds exactly the prefix before it), and
// once the failed rest is published again, as the relay does, the key's
// first deliveries are in order.
func testPipelinedFailure(t *testing.T, h Harness) {
	p := pipelined(t, h)
	if h.FailPublishAfter == nil {
		t.Skip("skipped: Harness.FailPublishAfter is nil")
	}
	topic := h.Topic(t)
	s := subscriber(t, h, group(), topic)
	msgs := keyRun(topic, 300)
	h.FailPublishAfter(t, 100)
	errs := publish(t, p, msgs)
	first := -1
	for i, err := range errs {
		switch {
		case first < 0 && err != nil:
			if errors.Is(err, txbox.ErrPermanent) {
				t.Fatalf("message %d: the injected failure came back permanent: %v", i, err)
			}
			first = i
		case first >= 0 && err == nil:
			t.Fatalf("message %d confirmed after message %d of its key failed: %v", i, first, errs[first])
		}
	}
	if first < 0 {
		t.Fatal("no message failed: Harness.FailPublishAfter injected nothing")
	}
	t.Logf("first failure at message %d: %v", first, errs[first])
	receiveInOrder(t, s, msgs[:first])
	adaptertest.Silent(t, s, quietPeriod, "the stream must hold only the messages before the failure")
	publishOK(t, p, msgs[first:])
	receiveInOrder(t, s, msgs[first:])
}
