package cloudevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkace "github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"

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
	p, err := kafkabroker.Open(ctx, kc.URL(), kafkabroker.Options{CreateTopics: true, Partitions: 1, Connection: kafkabroker.Connection{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := orderEvent()
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
	// The SDK adds the record's position.
	checkOrderEvent(t, decodeSDK(ctx, t, m), e, "kafkatopic", "kafkapartition", "kafkaoffset")
}
