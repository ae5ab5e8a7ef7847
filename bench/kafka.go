package main

// `bench skew --kafka`: the relays publish to franz-go's in-process fake
// Kafka (kfake; there is no Kafka server on this machine) instead of NATS.
// The Kafka adapter declares per-key pipelining (the idempotent producer
// keeps a partition's order with several requests in flight), so one
// aggregate's events go out many at a time. kfake is not Kafka: one node,
// in memory, in the bench's own process, so the figures say what the relay
// can do against a broker that pipelines, not what a Kafka cluster does.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaAddr is the fake cluster's address when skew runs with --kafka;
// every env then publishes to a topic of its own there.
var kafkaAddr string

// kafkaPartitions is the partitions of each env's topic: the adapter keys
// records by aggregate id, so one aggregate is one partition.
const kafkaPartitions = 8

func startKafka() (stop func(), err error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	kafkaAddr = c.ListenAddrs()[0]
	return func() { c.Close(); kafkaAddr = "" }, nil
}

// kafkaEnv is an env's Kafka side: its topic and an admin client.
type kafkaEnv struct {
	topic string
	cl    *kgo.Client
	adm   *kadm.Client
}

func newKafkaEnv(ctx context.Context, topic string) (*kafkaEnv, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		return nil, err
	}
	k := &kafkaEnv{topic: topic, cl: cl, adm: kadm.NewClient(cl)}
	res, err := k.adm.CreateTopic(ctx, kafkaPartitions, 1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka topic %s: %w", topic, err)
	}
	return k, nil
}

// stored is how many records the topic holds: the sum of its partitions'
// end offsets.
func (k *kafkaEnv) stored(ctx context.Context) uint64 {
	offs, err := k.adm.ListEndOffsets(ctx, k.topic)
	if err != nil {
		return 0
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return uint64(n)
}

func (k *kafkaEnv) close(ctx context.Context) {
	_, _ = k.adm.DeleteTopics(ctx, k.topic)
	k.cl.Close()
}

// kafkaOnly refuses skew contenders that have no Kafka form.
func kafkaOnly(order []string) error {
	for _, n := range order {
		if n != "txbox" && n != "txbox-2proc" {
			return fmt.Errorf("--kafka: contender %s publishes to NATS only; use --only txbox,txbox-2proc", n)
		}
	}
	return nil
}

// kafkaRelayArgs points a relay at the env's topic.
func kafkaRelayArgs(args []string, topic string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--broker":
			out = append(out, "--broker", "kafka://"+kafkaAddr)
			i++
		case "--nats-stream":
			i++
		case "--topic":
			out = append(out, "--topic", topic)
			i++
		default:
			out = append(out, args[i])
		}
	}
	return out
}
