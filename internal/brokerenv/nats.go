// Package brokerenv gives the end-to-end scenarios a broker of each kind:
// a fresh destination per test, a tap that sees every publish (duplicates
// included), what the broker durably stored, and stop/start where the test
// owns the broker process.
package brokerenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// NATS runs each scenario on a nats-server process of its own, so the
// broker-down scenario can kill and restart it.
type NATS struct{}

func (NATS) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	srv := testenv.StartNATS(t)
	prefix := newPrefix()
	stream := strings.ToUpper(prefix)
	subjects := prefix + ".>"

	js := testenv.JetStream(t, srv.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	nc := js.Conn()
	// A short duplicate window, so a scenario can make the relay's
	// republished copies reach the stream.
	const dedupe = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subjects}, Storage: jetstream.FileStorage, Duplicates: dedupe}); err != nil {
		t.Fatal(err)
	}

	var tapped, stored seenLog
	seen := func(m *nats.Msg) scenario.Seen {
		return scenario.Seen{EventID: m.Header.Get("ce-id"), AggregateID: m.Header.Get("ce-subject"), Type: m.Header.Get("ce-type")}
	}
	// Core subscribers see every publish, including those JetStream drops
	// as duplicates: that is how extra copies are counted.
	sub, err := nc.Subscribe(subjects, func(m *nats.Msg) { tapped.add(seen(m)) })
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	oc, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := oc.Consume(func(m jetstream.Msg) { stored.add(seen(&nats.Msg{Header: m.Headers()})) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	_ = nc.Flush()

	return &scenario.Destination{
		URL:   srv.URL,
		Args:  []string{"--nats-stream", stream, "--nats-subjects", subjects},
		Topic: prefix + ".{aggregate_type}.{event_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*natsbroker.Publisher, error) {
				return natsbroker.Open(ctx, srv.URL, natsbroker.Options{Stream: stream, Subjects: []string{subjects}})
			})
		},
		Tapped: func() []scenario.Seen {
			_ = nc.Flush()
			return tapped.all()
		},
		Stored:     stored.stored,
		Stop:       srv.Kill,
		Start:      srv.Start,
		PoisonType: "Order Created", // a space is not allowed in a subject
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			return testenv.Open(t, func(ctx context.Context) (*natsbroker.Subscriber, error) {
				return natsbroker.OpenSubscriber(ctx, srv.URL, natsbroker.SubscriberOptions{Stream: stream, Durable: durable, AckWait: 5 * time.Second})
			})
		},
		DedupeWindow: dedupe,
	}
}
