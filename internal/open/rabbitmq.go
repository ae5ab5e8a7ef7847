package open

import (
	"context"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox/broker"
	rabbitmqbroker "github.com/txbox/txbox/broker/rabbitmq"
)

var amqpFlags struct {
	exchange     string
	exchangeType string
	declare      bool
	maxPayload   int
}

func init() {
	registerPublisher(publisherDef{
		schemes: []string{"amqp", "amqps"},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&amqpFlags.exchange, "amqp-exchange", rabbitmqbroker.DefaultExchange, "RabbitMQ exchange events are published to (routing key = topic)")
			f.StringVar(&amqpFlags.exchangeType, "amqp-exchange-type", rabbitmqbroker.DefaultExchangeType, "type of the exchange when --amqp-declare is set")
			f.BoolVar(&amqpFlags.declare, "amqp-declare", false, "declare the exchange (durable) at start instead of requiring it to exist")
			f.IntVar(&amqpFlags.maxPayload, "amqp-max-payload", rabbitmqbroker.DefaultMaxPayload, "largest payload in bytes; keep it at or below the broker's max_message_size")
		},
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			return rabbitmqbroker.Open(ctx, raw, rabbitmqbroker.Options{
				Exchange: amqpFlags.exchange, ExchangeType: amqpFlags.exchangeType, CreateExchange: amqpFlags.declare,
				MaxPayload: amqpFlags.maxPayload, Connection: rabbitmqbroker.Connection{Logger: log, Name: "txbox-relay"},
			})
		},
	})
}
