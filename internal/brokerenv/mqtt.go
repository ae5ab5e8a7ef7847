package brokerenv

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// MQTT runs each scenario on a mosquitto process of its own (persistence
// on, unlimited per-client queues), so the broker-down scenario can kill
// and restart it.
//
// An MQTT broker keeps a message only for the subscriptions that exist when
// it arrives. So the tap — a persistent QoS 1 session on "<prefix>/#" that
// records and acknowledges everything — is subscribed before anything is
// published, and so is the session of every consumer a scenario opens
// later (MQTTDurables), as a deployed consumer's would be. What the tap saw is
// both Tapped and Stored: the broker holds nothing else.
type MQTT struct{}

// MQTTDurables are the consumer names whose sessions Setup makes in advance.
var MQTTDurables = []string{"inventory"}

var mqttQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (MQTT) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	srv := testenv.StartMosquitto(t)
	prefix := newPrefix()
	filter := prefix + "/#"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, d := range MQTTDurables {
		s, err := mqttbroker.OpenSubscriber(ctx, srv.URL, mqttbroker.SubscriberOptions{ClientID: d, Topics: []string{filter}, Connection: mqttbroker.Connection{Logger: mqttQuiet}})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close() // the session stays and queues
	}

	tap, err := mqttbroker.OpenSubscriber(ctx, srv.URL, mqttbroker.SubscriberOptions{
		ClientID: "tap-" + prefix, Topics: []string{filter}, MaxAckPending: 65535, AckWait: -1, Connection: mqttbroker.Connection{Logger: mqttQuiet},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tap.Close() }) // after the reading stops: cleanups run last first
	var seen seenLog
	testenv.Go(t, func(tctx context.Context) error {
		for tctx.Err() == nil {
			ds, err := tap.Receive(tctx, 1000)
			if err != nil {
				if tctx.Err() == nil && !errors.Is(err, context.Canceled) {
					// The broker is down: try again shortly, as a consumer would.
					select {
					case <-time.After(50 * time.Millisecond):
					case <-tctx.Done():
					}
				}
				continue
			}
			batch := make([]scenario.Seen, len(ds))
			for i, d := range ds {
				h := d.Raw().Headers
				batch[i] = scenario.Seen{EventID: h["id"], AggregateID: h["subject"], Type: h["type"]}
			}
			seen.add(batch...)
			for _, d := range ds {
				_ = d.Ack(tctx)
			}
		}
		return nil
	})

	return &scenario.Destination{
		URL: srv.URL,
		// A PUBACK "no matching subscribers" is a retry, not a delivery.
		Args:  []string{"--mqtt-require-subscribers"},
		Topic: prefix + "/{aggregate_type}/{event_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*mqttbroker.Publisher, error) {
				return mqttbroker.Open(ctx, srv.URL, mqttbroker.Options{Connection: mqttbroker.Connection{Logger: mqttQuiet}, RequireSubscribers: true})
			})
		},
		Tapped: seen.all,
		Stored: seen.stored,
		// mosquitto saves its store at most once a second, so a SIGKILL can
		// lose messages it already acknowledged: a property of the broker,
		// invisible to the relay. The outage here is a clean stop.
		Stop:  srv.Stop,
		Start: srv.Start,
		// '#' is a wildcard, which a published topic may not hold.
		PoisonType: "Order#Poison",
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			return testenv.Open(t, func(ctx context.Context) (*mqttbroker.Subscriber, error) {
				return mqttbroker.OpenSubscriber(ctx, srv.URL, mqttbroker.SubscriberOptions{
					ClientID: durable, Topics: []string{filter}, AckWait: 5 * time.Second, Connection: mqttbroker.Connection{Logger: mqttQuiet},
				})
			})
		},
	}
}
