package kafkabroker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
)

// withTopic starts a cluster of the test's own with topic, of partitions,
// and opens a publisher to it.
func withTopic(t *testing.T, topic string, partitions int32) (*kafkatest.Cluster, *kafkabroker.Publisher) {
	t.Helper()
	kc := kafkatest.Start(t)
	if err := kc.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	return kc, adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{})
}

// TestConformance runs brokertest against an in-process kfake cluster (there
// is no Kafka server here): its own, so the broker-down case can stop and
// restart it on the same port with its data directory.
func TestConformance(t *testing.T) {
	kc := kafkatest.Start(t)
	var n atomic.Int64
	const ackWait, partitions = time.Second, 3
	brokertest.Run(t, brokertest.Harness{
		// One partition per key keeps order; acks=all persists; Kafka does
		// not drop a republished event (the idempotent producer drops only
		// the client's own retries).
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			return brokertest.Capabilities{OrderPerKey: true, Persistent: true, Redelivery: true,
				MaxPayload: p.(*kafkabroker.Publisher).MaxPayload(), PipelinesPerKey: true}
		},
		// Small record batches: a run of one key goes out in several
		// produce requests, several in flight, so a failure can hit
		// the middle of it (see FailPublishAfter).
		NewPublisher: adaptertest.NewPublisher(kafkabroker.Open, kc.URL(), kafkabroker.Options{Connection: kafkabroker.Connection{Logger: adaptertest.Quiet}, MaxPayload: 16 << 10}),
		NewSubscriber: adaptertest.NewSubscriber(kafkabroker.OpenSubscriber, kc.URL(), func(group, topic string) kafkabroker.SubscriberOptions {
			return kafkabroker.SubscriberOptions{Group: group, Topics: []string{topic}, AckWait: ackWait}
		}),
		Topic: func(t *testing.T) string {
			topic := fmt.Sprintf("bt.t%d.Order.Created", n.Add(1))
			if err := kc.CreateTopic(topic, partitions, nil); err != nil {
				t.Fatal(err)
			}
			return topic
		},
		InvalidTopics: []string{
			"", "bt.a b", ".", "..", "bt/x", "bt.ünï", "bt.x:y", string(make([]byte, 250)),
		},
		// A valid topic name no topic has, until it is created.
		MissingDestination: func(t *testing.T) (string, func(*testing.T)) {
			topic := fmt.Sprintf("bt.missing%d.Order.Created", n.Add(1))
			return topic, func(t *testing.T) {
				if err := kc.CreateTopic(topic, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
		},
		// The topic, with its records and the groups' offsets, deleted
		// and created again (a new topic id). StaleDeliverySettlesNothing's
		// second subscriber joins the group beside the first, and the
		// cooperative-sticky balancer hands it the highest partition,
		// where the case's key lands (2 of 3): so it gets the new message.
		RecreateDestination: func(t *testing.T, topic string) {
			if err := kc.Kfake().DeleteTopic(topic); err != nil {
				t.Fatal(err)
			}
			if err := kc.CreateTopic(topic, partitions, nil); err != nil {
				t.Fatal(err)
			}
		},
		AckWait: ackWait,
		// kfake fails the first produce request that arrives after n
		// records, with an error franz-go does not retry and the adapter
		// reports as retryable.
		FailPublishAfter: func(t *testing.T, n int) {
			seen := 0
			h := kc.Kfake().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.PolicyViolation,
				When: func(req kmsg.Request) bool {
					before := seen
					seen += producedRecords(req.(*kmsg.ProduceRequest))
					return before >= n
				}})
			t.Cleanup(h.Remove)
		},
		StopBroker:  func(*testing.T) { kc.Stop() },
		StartBroker: func(*testing.T) { kc.Start() },
		PublishRaw: func(ctx context.Context, t *testing.T, topic string, headers map[string]string, body []byte) {
			cl := kc.Client(t)
			r := &kgo.Record{Topic: topic, Value: body}
			for k, v := range headers {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// producedRecords counts the records of a produce request from its record
// batch headers.
func producedRecords(req *kmsg.ProduceRequest) int {
	n := 0
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			for data := p.Records; len(data) > 0; {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(data); err != nil {
					break
				}
				n += int(b.NumRecords)
				data = data[12+int(b.Length):] // offset and length prefix the batch
			}
		}
	}
	return n
}
