package open

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
	natsbroker "github.com/txbox/txbox/broker/nats"
)

const topicField = "--topic (TXBOX_TOPIC)"

// SampleTopic renders tpl with sample values, to check what the broker
// would be given (the values of real rows are checked row by row).
func SampleTopic(tpl broker.Topic) string {
	return tpl.Render(txbox.Event{AggregateType: "Order", Type: "OrderPlaced"})
}

// CheckTopic refuses, before anything connects, a --topic that would send
// every row to DEAD: whitespace, control characters or a wildcard in its
// fixed parts (shared rule: no broker accepts those in a destination), or
// a rendering the broker's own rule rejects (NATS subject, MQTT topic,
// Kafka topic, AMQP routing key).
func CheckTopic(brokerURL string, tpl broker.Topic) error {
	if err := tpl.Validate(); err != nil {
		return err
	}
	fixed := strings.NewReplacer("{aggregate_type}", "", "{event_type}", "").Replace(string(tpl))
	for i, r := range fixed {
		switch {
		case r == utf8.RuneError:
			return topicErr(tpl, "has invalid UTF-8 at byte %d", i)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return topicErr(tpl, "has whitespace or a control character (%q) in its fixed part", r)
		case r == '*' || r == '>' || r == '#' || r == '+':
			return topicErr(tpl, "has the wildcard %q in its fixed part: wildcards are for subscriptions, a destination must be exact", r)
		}
	}
	sample := SampleTopic(tpl)
	scheme, _, _ := strings.Cut(brokerURL, "://")
	var err error
	switch scheme {
	case "nats", "tls":
		err = natsbroker.ValidateSubject(sample)
	case "mqtt", "mqtts":
		err = mqttbroker.ValidateTopic(sample)
	case "kafka":
		err = kafkabroker.ValidateTopic(sample)
	case "amqp", "amqps":
		if len(sample) > 255 {
			err = fmt.Errorf("routing key %q is longer than 255 bytes", sample)
		}
	}
	if err != nil {
		return topicErr(tpl, "renders as %q, which the broker refuses: %v", sample, err)
	}
	return nil
}

func topicErr(tpl broker.Topic, format string, a ...any) error {
	return &txbox.ConfigError{Field: topicField, Reason: fmt.Sprintf("%q ", string(tpl)) + fmt.Sprintf(format, a...)}
}

// relayTopic is the relay's --topic, for the adapters that check their
// destination at start (NATS: the stream that captures it).
var relayTopic broker.Topic

// UseTopic tells the adapters the relay's topic template before Publisher
// opens one.
func UseTopic(t broker.Topic) { relayTopic = t }
