package open

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
)

var kafkaFlags struct {
	createTopics      bool
	partitions        int
	replicationFactor int
	maxMessageBytes   int
}

func init() {
	registerPublisher(publisherDef{
		schemes: []string{"kafka"},
		flags: func(f *pflag.FlagSet) {
			f.BoolVar(&kafkaFlags.createTopics, "kafka-create-topics", false, "create a missing Kafka topic on its first message (else its messages wait, spending no attempts, until the topic exists)")
			f.IntVar(&kafkaFlags.partitions, "kafka-partitions", 0, "partitions of topics created with --kafka-create-topics (0: the broker's num.partitions)")
			f.IntVar(&kafkaFlags.replicationFactor, "kafka-replication-factor", 0, "replication factor of topics created with --kafka-create-topics (0: the broker's default.replication.factor)")
			f.IntVar(&kafkaFlags.maxMessageBytes, "kafka-max-message-bytes", kafkabroker.DefaultMaxPayload, "largest record (key, headers and payload) to send; a topic's max.message.bytes may lower it")
		},
		check: checkKafkaFlags,
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			return kafkabroker.Open(ctx, raw, kafkabroker.Options{
				CreateTopics:      kafkaFlags.createTopics,
				Partitions:        int32(kafkaFlags.partitions),
				ReplicationFactor: int16(kafkaFlags.replicationFactor),
				MaxPayload:        kafkaFlags.maxMessageBytes,
				Connection:        kafkabroker.Connection{Name: "txbox-relay", Logger: log},
			})
		},
	})
}

// checkKafkaFlags refuses, before anything connects, values Kafka would
// refuse only when a topic is created, if ever.
func checkKafkaFlags() error {
	if kafkaFlags.partitions < 0 || kafkaFlags.partitions > math.MaxInt32 {
		return &txbox.ConfigError{Field: flagField("kafka-partitions"), Reason: fmt.Sprintf("%d is not a partition count (0 for the broker's default)", kafkaFlags.partitions)}
	}
	if kafkaFlags.replicationFactor < 0 || kafkaFlags.replicationFactor > math.MaxInt16 {
		return &txbox.ConfigError{Field: flagField("kafka-replication-factor"), Reason: fmt.Sprintf("%d is not a replication factor (0 for the broker's default)", kafkaFlags.replicationFactor)}
	}
	if kafkaFlags.maxMessageBytes < 512 || kafkaFlags.maxMessageBytes > 1<<30 {
		return &txbox.ConfigError{Field: flagField("kafka-max-message-bytes"), Reason: fmt.Sprintf("%d is outside 512..%d", kafkaFlags.maxMessageBytes, 1<<30)}
	}
	return nil
}
