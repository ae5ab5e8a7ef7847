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
	"context"
	"testing"
	"time"

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
	// A destination that is valid but missing (no stream, topic or bound
	// queue) is not one of them: see MissingDestination.
	InvalidTopics []string

	// MissingDestination returns a valid destination that does not exist
	// yet (no stream captures the subject, no such topic, no queue bound to
	// the routing key, no endpoint at the path), and create, which makes it
	// exist. A publish to it must fail as an outage of the way out
	// (txbox.ErrBrokerUnavailable, never txbox.ErrPermanent), since a
	// destination deleted or not yet made says nothing about the event, and
	// succeed once create has run. Nil when the broker has no destination
	// that can be missing (the case is skipped).
	MissingDestination func(t *testing.T) (topic string, create func(t *testing.T))

	// RecreateDestination deletes the destination topic's messages go to,
	// with its messages and every consumer's state on it, and makes it
	// again, empty, as an operator re-creating it would: a NATS stream
	// deleted and created with the same config, a Redis stream key
	// deleted, a RabbitMQ queue deleted and declared again with its
	// binding, a Kafka topic deleted and created again. A delivery taken
	// before must then settle nothing of the new destination (see the
	// StaleDeliverySettlesNothing case). Nil when the broker keeps no
	// messages in a destination that can be made again (the case is
	// skipped); nil for a Synchronous harness.
	RecreateDestination func(t *testing.T, topic string)

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

	// FailPublishAfter makes the broker let about n more messages through
	// and then fail a publish once, with an error the adapter reports as
	// retryable, as a broker that refuses a write in the middle of a
	// pipelined run would. Nil when the harness cannot; the failure case
	// of PipelinesPerKey is then skipped.
	FailPublishAfter func(t *testing.T, n int)

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
		{"PipelinedOneKey", testPipelinedOneKey},
		{"PipelinedFailureLeavesNoGap", testPipelinedFailure},
		{"NativeDedupe", testNativeDedupe},
		{"PermanentOversize", testOversize},
		{"PermanentInvalidTopic", testInvalidTopic},
		{"MissingDestinationIsOutage", testMissingDestination},
		{"ReceiveHonoursContext", testReceiveContext},
		{"RedeliveryNak", testRedeliveryNak},
		{"RedeliveryAckWait", testRedeliveryAckWait},
		{"AsyncAck", testAsyncAck},
		{"StaleDeliverySettlesNothing", testStaleDelivery},
		{"UndecodableMessage", testUndecodable},
		{"BrokerDown", testBrokerDown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}
