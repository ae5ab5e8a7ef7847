package cloudevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkace "github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	"github.com/cloudevents/sdk-go/v2/binding"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
)

// TestKafkaCloudEventsSDKDecodes: the record the publisher stored, read back
// with a plain franz-go client, is a binary-mode CloudEvent to the official
// Go SDK's Kafka binding (protocol/kafka_sarama/v2), with every attribute
// where a non-txbox consumer looks for it. The binding reads a
// *sarama.ConsumerMessage; we fill one from the franz-go record rather than
// run sarama's client, since only the record's fields matter to it.
func TestKafkaCloudEventsSDKDecodes(t *testing.T) {
	kc := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := kafkabroker.Open(ctx, kc.URL(), kafkabroker.Options{CreateTopics: true, Partitions: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.UTC)
	e := txbox.Event{
		ID: txbox.NewID(), Type: "OrderPlaced", AggregateType: "Order", AggregateID: "order-7",
		AggregateVersion: 3, OccurredAt: at,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Payload: []byte(`{"total":12.5,"items":["a","b"]}`),
	}
	const topic = "outbox.Order.OrderPlaced"
	if err := p.Publish(ctx, []broker.Message{{Event: e, Topic: topic, Source: "shop/orders"}})[0]; err != nil {
		t.Fatal(err)
	}
	recs := kc.ReadAll(t, topic, 1, 10*time.Second)
	if len(recs) != 1 {
		t.Fatalf("read %d records", len(recs))
	}
	r := recs[0]
	cm := &sarama.ConsumerMessage{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		cm.Headers = append(cm.Headers, &sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	m := kafkace.NewMessageFromConsumerMessage(cm)
	if enc := m.ReadEncoding(); enc != binding.EncodingBinary {
		t.Fatalf("SDK sees encoding %v, want binary", enc)
	}
	ev, err := binding.ToEvent(ctx, m)
	if err != nil {
		t.Fatalf("SDK binding.ToEvent: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("SDK says the event is invalid: %v", err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("specversion", ev.SpecVersion(), "1.0")
	check("id", ev.ID(), e.ID)
	check("type", ev.Type(), e.Type)
	check("source", ev.Source(), "shop/orders")
	check("subject", ev.Subject(), e.AggregateID)
	check("time", ev.Time().UTC(), at)
	check("datacontenttype", ev.DataContentType(), "application/json")
	ext := ev.Extensions()
	check("aggregatetype", ext["aggregatetype"], "Order")
	check("aggregateversion", ext["aggregateversion"], "3")
	check("traceparent", ext["traceparent"], e.Headers["traceparent"])
	check("data", string(ev.Data()), string(e.Payload))
	for k := range ext {
		switch k {
		case "aggregatetype", "aggregateversion", "traceparent":
		case "kafkatopic", "kafkapartition", "kafkaoffset": // the SDK adds the record's position
		default:
			t.Errorf("unexpected extension %q = %v", k, ext[k])
		}
	}
}
