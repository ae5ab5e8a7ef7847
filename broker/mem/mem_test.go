package membroker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	membroker "github.com/txbox/txbox/broker/mem"
)

func TestConformance(t *testing.T) {
	b := membroker.New(membroker.Options{Dedupe: true, MaxPayload: 64 << 10, AckWait: time.Second})
	var n atomic.Int64
	brokertest.Run(t, brokertest.Harness{
		// Order per key and redelivery; dedupe and a payload limit only when
		// configured. Nothing survives the process.
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			m := p.(*membroker.Broker)
			return brokertest.Capabilities{OrderPerKey: true, Redelivery: true, NativeDedupe: m.Dedupes(), MaxPayload: m.MaxPayload(),
				PipelinesPerKey: true}
		},
		NewPublisher: func(context.Context, *testing.T) broker.Publisher { return b },
		NewSubscriber: func(_ context.Context, _ *testing.T, group, topic string) broker.Subscriber {
			return b.Subscribe(group, topic)
		},
		Topic:         func(*testing.T) string { return fmt.Sprintf("outbox.t%d.Order.Created", n.Add(1)) },
		InvalidTopics: []string{""},
		MissingDestination: func(*testing.T) (string, func(*testing.T)) {
			topic := fmt.Sprintf("outbox.m%d.Order.Created", n.Add(1))
			b.DeleteTopic(topic)
			return topic, func(*testing.T) { b.CreateTopic(topic) }
		},
		RecreateDestination: func(_ *testing.T, topic string) { b.RecreateTopic(topic) },
		AckWait:             time.Second,
		StopBroker:          func(*testing.T) { b.SetDown(true) },
		StartBroker:         func(*testing.T) { b.SetDown(false) },
		PublishRaw: func(_ context.Context, _ *testing.T, topic string, h map[string]string, body []byte) {
			b.PublishRaw(topic, h, body)
		},
		FailPublishAfter: func(_ *testing.T, n int) {
			b.FailAfter(n, 1, txbox.Unavailable(errors.New("mem: injected failure")))
		},
	})
}

// TestLimitsFollowOptions: dedupe and the payload limit hold only when
// configured, so brokertest skips what a plain broker lacks.
func TestLimitsFollowOptions(t *testing.T) {
	if b := membroker.New(membroker.Options{}); b.Dedupes() || b.MaxPayload() != 0 {
		t.Fatalf("plain broker: dedupe %v, max payload %d", b.Dedupes(), b.MaxPayload())
	}
	if b := membroker.New(membroker.Options{Dedupe: true, MaxPayload: 10}); !b.Dedupes() || b.MaxPayload() != 10 {
		t.Fatalf("configured broker: dedupe %v, max payload %d", b.Dedupes(), b.MaxPayload())
	}
}

// TestFailNextAndMessages: the relay's hooks. Injected failures hit the next
// n messages one by one, are returned as given, and leave no trace in
// Messages; Messages keeps duplicates in publish order.
func TestFailNextAndMessages(t *testing.T) {
	b := membroker.New(membroker.Options{Dedupe: true})
	ctx := context.Background()
	boom := errors.New("boom")
	b.FailNext(2, boom)
	m0, m1, m2 := adaptertest.Msg("t", "a", 0), adaptertest.Msg("t", "a", 1), adaptertest.Msg("t", "b", 2)
	errs := b.Publish(ctx, []broker.Message{m0, m1, m2})
	if !errors.Is(errs[0], boom) || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("errs = %v, want boom, boom, nil", errs)
	}
	if errs := b.Publish(ctx, []broker.Message{m0, m2}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errs = %v", errs)
	}
	got := b.Messages()
	want := []string{m2.Event.ID, m0.Event.ID, m2.Event.ID}
	if len(got) != len(want) {
		t.Fatalf("Messages() has %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Event.ID != want[i] {
			t.Errorf("Messages()[%d] = %s, want %s", i, got[i].Event.ID, want[i])
		}
	}
	if d := b.Duplicates(); d != 1 {
		t.Errorf("Duplicates() = %d, want 1", d)
	}
	// Messages is a copy: the test cannot corrupt the broker.
	got[0].Event.Payload[0] = 'X'
	if b.Messages()[0].Event.Payload[0] == 'X' {
		t.Error("Messages() shares payload memory with the broker")
	}
}

// TestDownAffectsEverything: a down broker fails publishes, receives and
// acks with ErrBrokerUnavailable, and keeps what it stored.
func TestDownAffectsEverything(t *testing.T) {
	b := membroker.New(membroker.Options{})
	ctx := context.Background()
	sub := b.Subscribe("g")
	if errs := b.Publish(ctx, []broker.Message{adaptertest.Msg("t", "a", 0)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.SetDown(true)
	if errs := b.Publish(ctx, []broker.Message{adaptertest.Msg("t", "a", 1)}); !errors.Is(errs[0], txbox.ErrBrokerUnavailable) {
		t.Errorf("Publish while down: %v", errs[0])
	}
	if _, err := sub.Receive(ctx, 1); !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("Receive while down: %v", err)
	}
	if err := ds[0].Ack(ctx); !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("Ack while down: %v", err)
	}
	b.SetDown(false)
	if err := ds[0].Ack(ctx); err != nil {
		t.Errorf("Ack after recovery: %v", err)
	}
	if n := len(b.Messages()); n != 1 {
		t.Errorf("Messages() = %d after the outage, want 1", n)
	}
}

// TestGroupsAndFilters: every group sees every matching message once;
// receivers of one group share them; topic patterns follow NATS rules.
func TestGroupsAndFilters(t *testing.T) {
	b := membroker.New(membroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g1a := b.Subscribe("g1", "orders.>")
	g1b := b.Subscribe("g1", "orders.>")
	g2 := b.Subscribe("g2", "orders.*.created")
	var msgs []broker.Message
	for i, topic := range []string{"orders.eu.created", "orders.us.shipped", "payments.eu.created", "orders.eu.created"} {
		msgs = append(msgs, adaptertest.Msg(topic, "k", i))
	}
	adaptertest.PublishOK(ctx, t, b, msgs)
	count := func(s broker.Subscriber, max int) int {
		ds, err := s.Receive(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return len(ds)
	}
	if a, b := count(g1a, 2), count(g1b, 5); a != 2 || b != 1 {
		t.Errorf("group g1 receivers got %d and %d, want 2 and 1 (3 orders.> messages shared)", a, b)
	}
	if n := count(g2, 5); n != 2 {
		t.Errorf("group g2 got %d, want 2 orders.*.created messages", n)
	}
}

// TestStaleAckDoesNotCancelRedelivery: a handler that outlived the ack wait
// cannot ack away the newer delivery of the same message.
func TestStaleAckDoesNotCancelRedelivery(t *testing.T) {
	b := membroker.New(membroker.Options{AckWait: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := b.Subscribe("g")
	b.Publish(ctx, []broker.Message{adaptertest.Msg("t", "k", 0)})
	first, err := s.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Receive(ctx, 1) // after the ack wait
	if err != nil {
		t.Fatal(err)
	}
	if second[0].Attempt() != 2 {
		t.Fatalf("Attempt() = %d, want 2", second[0].Attempt())
	}
	if err := first[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second[0].Nak(ctx, 0); err != nil {
		t.Fatal(err)
	}
	third, err := s.Receive(ctx, 1)
	if err != nil {
		t.Fatalf("the Nak'd newer delivery did not come back: %v", err)
	}
	if err := third[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := third[0].Ack(ctx); err == nil {
		t.Error("second Ack of one delivery succeeded")
	}
}

// TestInvalidHeaderIsPermanent: mem rejects what the wire format cannot
// carry, as real brokers do.
func TestInvalidHeaderIsPermanent(t *testing.T) {
	b := membroker.New(membroker.Options{})
	m := adaptertest.Msg("t", "k", 0)
	m.Event.Headers = map[string]string{"Bad-Name": "x"}
	if errs := b.Publish(context.Background(), []broker.Message{m}); !errors.Is(errs[0], txbox.ErrPermanent) {
		t.Fatalf("err = %v, want permanent", errs[0])
	}
}

// TestRecreateTopic: a topic made again has lost its messages, delivered or
// not, and what groups held of them; other topics keep theirs, and a
// delivery taken before settles nothing.
func TestRecreateTopic(t *testing.T) {
	b := membroker.New(membroker.Options{Dedupe: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	held, waiting, other := adaptertest.Msg("t", "a", 0), adaptertest.Msg("t", "a", 1), adaptertest.Msg("u", "a", 2)
	adaptertest.PublishOK(ctx, t, b, []broker.Message{held, waiting, other})
	s := b.Subscribe("g", "t", "u")
	ds, err := s.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	b.RecreateTopic("t")
	again := adaptertest.Msg("t", "a", 3)
	again.Event.ID = held.Event.ID // the new topic's dedupe forgot the old one's ids
	adaptertest.PublishOK(ctx, t, b, []broker.Message{again})
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack of a delivery of the deleted topic: %v, want nil (settles nothing)", err)
	}
	var got []string
	adaptertest.Receive(ctx, t, s, 2, func(d broker.Delivery) {
		got = append(got, string(d.Raw().Body))
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if want := []string{`{"n":2}`, `{"n":3}`}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after RecreateTopic delivered %v, want %v (the other topic's, then the new one's)", got, want)
	}
	adaptertest.Silent(t, s, 300*time.Millisecond, "nothing more is stored")
}

// Refuse: a refused event fails for good and is not stored; the others of
// the call are; taken again once no longer refused.
func TestRefuse(t *testing.T) {
	b := membroker.New(membroker.Options{})
	poison, next := txbox.MustEvent("Order", "o-1", "E", nil), txbox.MustEvent("Order", "o-2", "E", nil)
	b.Refuse(poison.ID, true)
	errs := b.Publish(context.Background(), []broker.Message{{Event: poison, Topic: "t"}, {Event: next, Topic: "t"}})
	if !errors.Is(errs[0], txbox.ErrPermanent) || errs[1] != nil || len(b.Messages()) != 1 {
		t.Fatalf("refused: %v, %d stored", errs, len(b.Messages()))
	}
	b.Refuse(poison.ID, false)
	if errs := b.Publish(context.Background(), []broker.Message{{Event: poison, Topic: "t"}}); errs[0] != nil || len(b.Messages()) != 2 {
		t.Fatalf("after Refuse(false): %v, %d stored", errs, len(b.Messages()))
	}
}
