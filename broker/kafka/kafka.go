// Package kafkabroker publishes and consumes txbox events through Apache
// Kafka with github.com/twmb/franz-go, in CloudEvents 1.0 binary content
// mode as the CloudEvents Kafka protocol binding defines it.
//
// Its directory is broker/kafka, but the package is named kafkabroker so that
// it does not shadow other Kafka packages in code importing both:
//
//	import kafkabroker "github.com/txbox/txbox/broker/kafka"
//
// # Wire format
//
// Each event is one Kafka record on the topic rendered from the relay's
// template. The record key is the aggregate id, so every event of an
// aggregate lands in one partition, in publish order (the default partitioner
// hashes keys with murmur2, as the Java client does). The value is the JSON
// payload, untouched. Headers follow the binding's binary mode: every
// CloudEvents attribute except datacontenttype travels as a header named
// "ce_" + attribute ("ce_specversion", "ce_id", "ce_type", "ce_source",
// "ce_subject", "ce_time", "ce_aggregatetype", "ce_aggregateversion" (when above 0),
// "ce_traceparent", ...), and datacontenttype is the "content-type" header
// ("application/json"). This is what the CloudEvents Go SDK's Kafka binding
// (protocol/kafka_sarama/v2) reads as a binary-mode event.
//
// # Publishing
//
// The producer is franz-go's idempotent producer with acks=all, so a batch
// the client retries internally (a lost response, a leader change) is stored
// once. That is not event dedupe: an event the relay publishes again (after a
// crash between the broker's ack and the SENT mark) is a new record, and
// Kafka stores both; the consumer's inbox absorbs the copy. The conformance
// harness therefore declares NativeDedupe false.
//
// Publish hands every record to the client in slice order without waiting
// between them, then waits for each acknowledgement or for ctx. Per-message
// errors are classified: a topic name Kafka cannot accept, a record over the
// topic's max.message.bytes, a record the broker calls invalid are permanent
// (txbox.ErrPermanent); a missing topic (unless Options.CreateTopics), an
// authorization failure, an unreachable cluster, a deadline, or a partition
// that did not answer in time is txbox.ErrBrokerUnavailable, which spends
// none of the event's attempts. When ctx ends, records the client still
// holds are cancelled (kgo.AllowIdempotentProduceCancellation): franz-go then
// fails every later buffered record of the same partition too and bumps its
// producer epoch before it produces again, so a cancelled record is never
// written after a record handed over later, and the idempotent sequence
// check keeps the broker from storing a later batch of a partition without
// the earlier one. A cancelled record whose request had already reached the
// broker may still have been stored: the relay publishes it again and the
// inbox drops the copy. That is at-least-once, as the relay promises.
//
// A Kafka client does not fail fast when the cluster is down: it keeps
// reconnecting and would hold every call until its deadline. After a call
// that found the cluster unreachable, the next call first asks a broker for
// its API versions (kgo.Client.Ping) and, if none answers, fails at once
// with txbox.ErrBrokerUnavailable. This is a probe, not a retry: retries and
// their backoff stay with the relay.
//
// # Consuming
//
// Subscriber is a consumer-group member (kgo.ConsumerGroup) that commits
// offsets itself. Kafka offsets are per partition and a commit means "every
// record before this offset is done", so the subscriber commits, per
// partition, the offset of the oldest record it delivered that is not yet
// acknowledged (or the offset after the last one read, when all are). Ack
// therefore returns once that offset is committed; acknowledging a record
// while an older one of its partition is still out is recorded and becomes
// part of the commit that follows the older one's Ack. AckAsync
// (broker.AsyncAcker, which the inbox uses after its commit) records the
// ack the same way and returns at once: a committer commits the marked
// partitions' offsets in the background, one commit for every ack that
// arrived meanwhile, and Close commits what is left. A crash before that
// commit brings the records again, which an inbox absorbs.
//
// Kafka has no per-message negative acknowledgement. Nak(delay) keeps the
// record in the subscriber and hands it out again, as a new delivery with a
// higher Attempt, once delay has passed; meanwhile the committed offset of
// its partition stays below it, so if the process stops, or the partition
// moves to another group member before the record is acknowledged, Kafka
// delivers it again from the committed offset, with the later records of that
// partition, which the inbox recognises as duplicates. The subscriber does not
// rewind the partition on Nak: that would deliver every later record of the
// partition again on each retry of one failing event. A delivery neither
// acknowledged nor Nak'd within SubscriberOptions.AckWait comes back the same
// way. Attempt counts the deliveries of a record by this subscriber since it
// read the record from Kafka; it starts again at 1 after a restart or a
// rebalance.
//
// # Tests
//
// There is no Kafka server on the machines this project is developed on. The
// tests of this package, the conformance suite (broker/brokertest) and the
// end-to-end scenarios run against franz-go's in-process fake cluster
// (github.com/twmb/franz-go/pkg/kfake, wrapped in package kafkatest), which
// speaks the Kafka wire protocol on 127.0.0.1, so the txbox binary reaches it
// over TCP like a real broker. kfake is not Apache Kafka: replication, ISR
// and acks=all are trivially satisfied by a single node, and a restart in the
// tests is kfake's clean shutdown with its data directory, not a crash.
package kafkabroker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/defaults"
)

// Header names on the wire, per the CloudEvents Kafka protocol binding.
const (
	// HeaderPrefix starts every CloudEvents attribute header except
	// datacontenttype.
	HeaderPrefix = "ce_"
	// headerContentType carries datacontenttype in binary mode.
	headerContentType = "content-type"
)

// Defaults for Options and SubscriberOptions.
const (
	defaultPort           = 9092
	DefaultMaxPayload     = 1_000_012 // Kafka's default max.message.bytes
	defaultAckTimeout     = 30 * time.Second
	defaultConnectTimeout = defaults.ConnectTimeout
	defaultAckWait        = 30 * time.Second
	defaultCommitTimeout  = 10 * time.Second
	// maxTopicLength is the longest topic name Kafka accepts.
	maxTopicLength = 249
)

// ValidateTopic reports why Kafka would refuse topic as a topic name: empty,
// longer than 249 characters, "." or "..", or a character other than ASCII
// letters, digits, '.', '_' and '-'. The publisher checks every rendered
// topic with it, so a bad template or event type fails at its row with a
// clear reason.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("empty topic name")
	case len(topic) > maxTopicLength:
		return fmt.Errorf("topic name %.40q... is %d characters, over Kafka's limit of %d", topic, len(topic), maxTopicLength)
	case topic == "." || topic == "..":
		return fmt.Errorf("topic name %q is not allowed", topic)
	}
	for i, c := range topic {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			continue
		}
		return fmt.Errorf("topic name %q has %q at byte %d; Kafka topic names allow only ASCII letters, digits, '.', '_' and '-'", topic, c, i)
	}
	return nil
}

// parseBrokers turns a broker list into seed addresses. It accepts
// "kafka://host:port[,host:port...]", the same with "kafka://" before each
// address, or bare "host:port" pairs; a missing port is 9092. Credentials in
// the URL are refused (configure SASL and TLS through ClientOptions), so that a
// secret never ends up in a log line.
func parseBrokers(raw string) ([]string, error) {
	bad := func(reason string) ([]string, error) {
		return nil, &txbox.ConfigError{Field: "Kafka brokers", Reason: reason}
	}
	if strings.TrimSpace(raw) == "" {
		return bad("empty; e.g. kafka://127.0.0.1:9092")
	}
	var seeds []string
	for _, part := range strings.Split(raw, ",") {
		p := strings.TrimSpace(part)
		if p == "" {
			continue
		}
		if scheme, rest, ok := strings.Cut(p, "://"); ok {
			if !strings.EqualFold(scheme, "kafka") {
				return bad(fmt.Sprintf("scheme %q not supported in a broker list (kafka://host:port)", scheme))
			}
			p = rest
		}
		if strings.Contains(p, "@") {
			return bad("credentials in the broker URL are not supported; configure SASL through the client options")
		}
		p = strings.TrimSuffix(p, "/")
		if strings.ContainsAny(p, "/?#") {
			return bad(fmt.Sprintf("%q: a broker address is host:port, without path or query", p))
		}
		host, port, err := net.SplitHostPort(p)
		if err != nil {
			host, port = p, strconv.Itoa(defaultPort)
			if strings.Count(p, ":") > 1 && !strings.HasPrefix(p, "[") {
				return bad(fmt.Sprintf("%q: put an IPv6 address in brackets, e.g. [::1]:9092", p))
			}
		}
		if host == "" {
			return bad(fmt.Sprintf("%q has no host", part))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("%q: port %q is not a number in 1..65535", p, port))
		}
		seeds = append(seeds, net.JoinHostPort(host, port))
	}
	if len(seeds) == 0 {
		return bad("no broker address in " + fmt.Sprintf("%q", raw))
	}
	return seeds, nil
}

// Connection is how Open and OpenSubscriber reach the cluster, embedded in
// Options and SubscriberOptions: one value serves both sides.
type Connection struct {
	// ConnectTimeout bounds dialling one broker. Default 5s.
	ConnectTimeout time.Duration
	// Name is the client id the brokers log. Default "txbox-publisher"
	// (Open) or "txbox-subscriber" (OpenSubscriber).
	Name string
	// Logger gets topic creation and franz-go's warnings. Default
	// slog.Default().
	Logger *slog.Logger
	// ClientOptions are franz-go's own, added after txbox's: TLS
	// (kgo.DialTLSConfig), SASL (kgo.SASL), compression, session and
	// rebalance timeouts, fetch sizes, and so on. What a side's guarantees
	// rest on is enforced after them: the publisher's idempotent writes,
	// acks=all and the cancellation behaviour described in the package
	// documentation; the subscriber's manual commits, and a new group
	// starting at the earliest offset.
	ClientOptions []kgo.Opt
}

// withDefaults fills the fields left zero; name is the side's client id.
func (c *Connection) withDefaults(name string) {
	c.Name, c.Logger, c.ConnectTimeout = defaults.Client(c.Name, name, c.Logger, c.ConnectTimeout)
}

// newClient makes a franz-go client for brokers (see parseBrokers) with
// txbox's options, then own (the side's defaults), then the caller's
// ClientOptions, then enforced, which the side's guarantees rest on and
// which the caller's may therefore not change. A bad broker list or option
// is a *txbox.ConfigError.
func newClient(brokers string, c Connection, own []kgo.Opt, enforced ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := parseBrokers(brokers)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(c.Name),
		kgo.DialTimeout(c.ConnectTimeout),
		kgo.WithLogger(kgoLogger{c.Logger}),
		kgo.MetadataMinAge(time.Second),
	}
	opts = append(append(append(opts, own...), c.ClientOptions...), enforced...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, &txbox.ConfigError{Field: "Kafka ClientOptions", Reason: err.Error()}
	}
	return cl, nil
}

// ping checks that one of the client's seed brokers answers, bounded by
// ctx and twice the dial timeout.
func ping(ctx context.Context, cl *kgo.Client, dial time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, 2*dial)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
		return txbox.Unavailable(fmt.Errorf("kafka: connect to %s: %w", strings.Join(seeds, ","), err))
	}
	return nil
}

// kgoLogger sends franz-go's errors to slog as warnings and its warnings as
// info: franz-go warns about every internal retry during an outage, which
// the relay already reports once per row. Its info and debug lines are
// dropped.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelInfo
	if level == kgo.LogLevelError {
		lv = slog.LevelWarn
	}
	l.log.Log(context.Background(), lv, "kafka: "+msg, keyvals...)
}
