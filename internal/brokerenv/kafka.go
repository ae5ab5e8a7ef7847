package brokerenv

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txbox/txbox/broker"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// Kafka runs each scenario on an in-process Kafka cluster of its own
// (franz-go's kfake; there is no Kafka server on this machine), listening on
// a loopback port the txbox binary connects to, with its data in a
// directory of the test's so that Stop and Start keep what it stored. Topics
// are made by the relay (--kafka-create-topics) under a per-test prefix.
type Kafka struct{}

const kafkaPartitions = 4

func (Kafka) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	kc := kafkatest.Start(t)
	prefix := newPrefix()
	topics := "^" + regexp.QuoteMeta(prefix) + `\..*`
	inTest := regexp.MustCompile(topics)
	log := startLog(t, kc.Addr(), topics)

	// Kafka keeps every copy a producer sends, so what it stores is every
	// publish, duplicates included: Tapped and Stored are the same list.
	// Records read back come per partition; they are put in the order the
	// broker received them, which the cluster's produce tap records, so
	// that per-aggregate order can be checked across topics too.
	stored := func() []scenario.Seen {
		remaining := map[string]int{}
		logged := log.all()
		for _, s := range logged {
			remaining[s.EventID]++
		}
		var out []scenario.Seen
		for _, r := range kc.Produced() {
			if !inTest.MatchString(r.Topic) {
				continue
			}
			s := seenRecord(r)
			if remaining[s.EventID] > 0 {
				remaining[s.EventID]--
				out = append(out, s)
			}
		}
		// Stored but not seen arriving (none expected): at the end, in
		// partition order.
		for _, s := range logged {
			if remaining[s.EventID] > 0 {
				remaining[s.EventID]--
				out = append(out, s)
			}
		}
		return out
	}
	return &scenario.Destination{
		URL:   kc.URL(),
		Args:  []string{"--kafka-create-topics", "--kafka-partitions", "4"},
		Topic: prefix + ".{aggregate_type}.{event_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*kafkabroker.Publisher, error) {
				return kafkabroker.Open(ctx, kc.URL(), kafkabroker.Options{CreateTopics: true, Partitions: kafkaPartitions})
			})
		},
		Tapped:     stored,
		Stored:     func(*testing.T) []scenario.Seen { return stored() },
		Stop:       kc.Stop,
		Start:      kc.Start,
		PoisonType: "Order Created", // a space is not allowed in a topic name
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			return testenv.Open(t, func(ctx context.Context) (*kafkabroker.Subscriber, error) {
				return kafkabroker.OpenSubscriber(ctx, kc.URL(), kafkabroker.SubscriberOptions{
					Group: durable, Topics: []string{topics}, Regex: true, AckWait: 5 * time.Second,
					Connection: kafkabroker.Connection{ClientOptions: []kgo.Opt{kgo.MetadataMaxAge(time.Second)}},
				})
			})
		},
		DedupeWindow: 0, // Kafka stores a republished event again; the inbox drops it
	}
}

func seenRecord(r *kgo.Record) scenario.Seen {
	var s scenario.Seen
	for _, h := range r.Headers {
		switch h.Key {
		case kafkabroker.HeaderPrefix + "id":
			s.EventID = string(h.Value)
		case kafkabroker.HeaderPrefix + "subject":
			s.AggregateID = string(h.Value)
		case kafkabroker.HeaderPrefix + "type":
			s.Type = string(h.Value)
		}
	}
	return s
}

// startLog reads every record of the test's topics from the start, with a
// plain consumer (no group), for as long as the test runs; it reconnects by
// itself across a broker restart.
func startLog(t *testing.T, addr, topics string) *seenLog {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topics),
		kgo.ConsumeRegex(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMaxAge(250*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close) // after the reading stops: cleanups run last first
	l := &seenLog{}
	testenv.Go(t, func(ctx context.Context) error {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			recs := fs.Records()
			if len(recs) == 0 {
				if ctx.Err() == nil && len(fs.Errors()) > 0 {
					time.Sleep(50 * time.Millisecond) // the broker is down: do not spin
				}
				continue
			}
			seen := make([]scenario.Seen, len(recs))
			for i, r := range recs {
				seen[i] = seenRecord(r)
			}
			l.add(seen...)
		}
		return nil
	})
	return l
}
