package brokerenv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox/broker"
	rabbitmqbroker "github.com/txbox/txbox/broker/rabbitmq"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// RabbitMQ runs each scenario on the shared RabbitMQ (TXBOX_TEST_AMQP),
// with an exchange and queues of its own, reached through a TCP proxy of
// the test's own: the broker-down scenario cuts the proxy rather than stop
// the shared server.
//
// The topic is "<prefix>.{aggregate_type}.{event_type}" on a topic
// exchange; three durable queues are bound with "<prefix>.*.*" before
// anything is published: "stored" and "tap", drained in the background
// (RabbitMQ does not drop duplicates, so both see every copy), and "inbox",
// which the scenario's durable consumer reads.
//
// RabbitMQ takes any routing key up to 255 bytes, and one no queue is bound
// for is an outage (the queue may be bound later), not the event's fault.
// So the poison row is the one routing failure an event can cause, a key
// over 255 bytes: the prefix is long enough that an event type of 128
// characters, the most an event may have, takes the key over.
type RabbitMQ struct{}

// rabbitmqPoisonType is 128 characters long.
var rabbitmqPoisonType = "OrderPoison" + strings.Repeat("X", 128-len("OrderPoison"))

func (RabbitMQ) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	direct := testenv.URL(t, "TXBOX_TEST_AMQP")
	via, proxy := testenv.ProxyURL(t, direct)

	prefix := newPrefix()
	prefix += strings.Repeat("p", 127-len(prefix))
	exchange := "txbox." + prefix
	binding := prefix + ".*.*"
	queues := map[string]string{"stored": prefix + ".stored", "tap": prefix + ".tap", "inbox": prefix + ".inbox"}

	conn, ch := DialAMQP(t, direct)
	if err := ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, binding, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err != nil {
			return
		}
		for _, q := range queues {
			_, _ = c.QueueDelete(q, false, false, false)
		}
		_ = c.ExchangeDelete(exchange, false, false)
	})

	var tapped, stored seenLog
	drain := func(queue string, into *seenLog) {
		c, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		ds, err := c.Consume(queue, "", true, true, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for d := range ds {
				s, _ := d.Headers[rabbitmqbroker.HeaderPrefix+"subject"].(string)
				typ, _ := d.Headers[rabbitmqbroker.HeaderPrefix+"type"].(string)
				into.add(scenario.Seen{EventID: d.MessageId, AggregateID: s, Type: typ})
			}
		}()
	}
	drain(queues["stored"], &stored)
	drain(queues["tap"], &tapped)

	var subOnce sync.Once
	var subName string
	return &scenario.Destination{
		URL:   via,
		Args:  []string{"--amqp-exchange", exchange},
		Topic: prefix + ".{aggregate_type}.{event_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*rabbitmqbroker.Publisher, error) {
				return rabbitmqbroker.Open(ctx, via, rabbitmqbroker.Options{Exchange: exchange})
			})
		},
		Tapped:     tapped.all,
		Stored:     stored.stored,
		Stop:       proxy.Cut,
		Start:      proxy.Restore,
		PoisonType: rabbitmqPoisonType,
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			// RabbitMQ keeps a consumer's messages in its queue, which must
			// exist before they are published: the one queue made above
			// serves one durable consumer.
			subOnce.Do(func() { subName = durable })
			if durable != subName {
				t.Fatalf("brokerenv.RabbitMQ has one pre-bound consumer queue, already used by %q; %q would need its own, bound before publishing", subName, durable)
			}
			// Once the subscriber is closed (cleanups run last first), its
			// retry queues go.
			t.Cleanup(func() {
				if c, err := conn.Channel(); err == nil {
					for _, d := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
						_, _ = c.QueueDelete(rabbitmqbroker.RetryQueueName(queues["inbox"], d), false, false, false)
					}
				}
			})
			return testenv.Open(t, func(ctx context.Context) (*rabbitmqbroker.Subscriber, error) {
				return rabbitmqbroker.OpenSubscriber(ctx, via, rabbitmqbroker.SubscriberOptions{
					Queue: queues["inbox"], Exchange: exchange, Passive: true, AckWait: 5 * time.Second, Connection: rabbitmqbroker.Connection{Name: durable},
				})
			})
		},
	}
}

// DialAMQP connects to rawURL for a test's own topology and inspection,
// closed when the test ends, and opens a channel on it.
func DialAMQP(t testing.TB, rawURL string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := amqp.Dial(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}
