package kafkabroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/halt"
)

// Options configure a Publisher. The zero value publishes to topics that
// must exist, with Kafka's default size limit.
type Options struct {
	// CreateTopics creates a missing topic the first time a message is
	// published to it, with Partitions and ReplicationFactor. Without it a
	// missing topic is an outage of that destination, naming the topic
	// (txbox.ErrBrokerUnavailable): its events wait, spending no attempt,
	// until the topic is created, as Kafka clusters usually run with
	// auto.create.topics.enable=false.
	CreateTopics bool
	// Partitions of a created topic. 0 means the broker's default
	// (num.partitions; needs Kafka 2.4 or later).
	Partitions int32
	// ReplicationFactor of a created topic. 0 means the broker's default
	// (default.replication.factor; needs Kafka 2.4 or later).
	ReplicationFactor int16
	// MaxPayload bounds one record batch before compression, which bounds
	// one record: key, headers and payload together (Kafka limits records,
	// not payloads). The publisher also reads each topic's
	// max.message.bytes when it first publishes to it and uses the smaller
	// of the two for that topic. Default 1,000,012, Kafka's default;
	// allowed 512..1 GiB.
	MaxPayload int
	// AckTimeout bounds how long a record may wait in the client for its
	// acknowledgement even when the caller's context has no deadline.
	// Default 30s.
	AckTimeout time.Duration
	// Connection is how to reach the cluster, the same as in
	// SubscriberOptions.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *Options) withDefaults() error {
	o.MaxPayload = cmp.Or(o.MaxPayload, DefaultMaxPayload)
	if o.MaxPayload < 512 || o.MaxPayload > 1<<30 {
		return &txbox.ConfigError{Field: "Kafka MaxPayload", Reason: fmt.Sprintf("%d is outside 512..%d", o.MaxPayload, 1<<30)}
	}
	if o.Partitions < 0 || o.ReplicationFactor < 0 {
		return &txbox.ConfigError{Field: "Kafka topic creation", Reason: "partitions and replication factor must be positive, or 0 for the broker's default"}
	}
	o.AckTimeout = defaults.Positive(o.AckTimeout, defaultAckTimeout)
	o.Connection.withDefaults("txbox-publisher")
	return nil
}

// Publisher publishes to Kafka. It is safe for concurrent use.
type Publisher struct {
	cl   *kgo.Client
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	topics map[string]int // topics known to exist -> their record limit

	limits    sync.Map    // topic -> int32, read by franz-go's ProducerBatchMaxBytesFn
	purging   sync.Map    // topic -> true while the client forgets it (see purge)
	suspect   atomic.Bool // the last call found the cluster unreachable
	closeOnce sync.Once
}

var (
	_ broker.Publisher        = (*Publisher)(nil)
	_ broker.OrderedPipeliner = (*Publisher)(nil)
)

// PipelinesPerKey is true: with the idempotent producer, which Open
// insists on, a partition's records are stored in the order they were
// handed over with several requests in flight (the broker refuses a batch
// whose sequence number does not follow the last one stored), and a batch
// that fails for good fails every later buffered record of its partition
// with it (franz-go's failAllRecords), as a cancelled record does (see the
// package documentation). One key is one partition, so nothing of a key is
// stored after a record of it that failed.
func (p *Publisher) PipelinesPerKey() bool { return true }

// Open connects to the brokers and checks that one answers. brokers is
// "kafka://host:port[,host:port...]", the same with "kafka://" before each
// address, or bare "host:port" pairs; a missing port is 9092. Credentials
// in the URL are refused (configure SASL and TLS through ClientOptions).
// An unreachable cluster is reported with txbox.ErrBrokerUnavailable, a
// bad broker list or option with a *txbox.ConfigError.
func Open(ctx context.Context, brokers string, opts Options) (*Publisher, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	p := &Publisher{opts: opts, log: opts.Logger, topics: map[string]int{}}

	// Every Publish waits for its records, so lingering only adds latency;
	// records handed over while a request is in flight are batched anyway.
	own := []kgo.Opt{kgo.ProducerLinger(0)}
	cl, err := newClient(brokers, opts.Connection, own,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowIdempotentProduceCancellation(),
		kgo.RecordDeliveryTimeout(opts.AckTimeout),
		kgo.ProduceRequestTimeout(min(opts.AckTimeout, 10*time.Second)),
		kgo.ProducerBatchMaxBytesFn(p.batchMax),
	)
	if err != nil {
		return nil, err
	}
	if off, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		cl.Close()
		return nil, &txbox.ConfigError{Field: "Kafka ClientOptions", Reason: "idempotent writes must stay enabled (remove kgo.DisableIdempotentWrite)"}
	}
	if err := ping(ctx, cl, opts.ConnectTimeout); err != nil {
		cl.Close()
		return nil, err
	}
	p.cl = cl
	return p, nil
}

// batchMax is franz-go's per-topic batch limit: the smaller of
// MaxPayload and the topic's max.message.bytes, learnt before the first
// record for the topic is produced.
func (p *Publisher) batchMax(topic string) int32 {
	if v, ok := p.limits.Load(topic); ok {
		return v.(int32)
	}
	return int32(p.opts.MaxPayload)
}

// MaxPayload is Options.MaxPayload; a topic may allow less.
func (p *Publisher) MaxPayload() int { return p.opts.MaxPayload }

// Client is the underlying franz-go client, for health checks and metrics.
func (p *Publisher) Client() *kgo.Client { return p.cl }

// Close fails what the client still holds and closes its connections.
func (p *Publisher) Close() error {
	p.closeOnce.Do(p.cl.Close)
	return nil
}

type produced struct {
	i   int
	err error
}

// Publish hands every message to the client in slice order without waiting
// between them, then waits for each acknowledgement, or for ctx.
//
// A message that can never be sent as it is fails with txbox.ErrPermanent
// and the others go on. One for a topic the cluster says is missing or
// forbidden fails with txbox.ErrBrokerUnavailable, and the others go on
// too. Once the cluster is found unreachable, the rest of the call is not
// handed over and fails with txbox.ErrBrokerUnavailable; so do the
// messages still unacknowledged when ctx ends (see the package
// documentation for what happens to them in the client).
//
// A Kafka client retries an unreachable cluster internally rather than
// failing, so a call during an outage would use its whole deadline. After a
// call that found the cluster unreachable, the next one therefore first
// asks any broker for its API versions; if none answers (connection
// refused), every message fails at once with txbox.ErrBrokerUnavailable,
// so that the relay's retries are not held up behind one another.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) (errs []error) {
	errs = make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	if p.suspect.Load() && ctx.Err() == nil {
		if err := p.cl.Ping(ctx); err != nil {
			err = txbox.Unavailable(fmt.Errorf("kafka: no broker answers: %w", err))
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
		p.suspect.Store(false)
	}
	defer func() {
		for _, err := range errs {
			if errors.Is(err, txbox.ErrBrokerUnavailable) {
				p.suspect.Store(true)
				return
			}
		}
	}()
	results := make(chan produced, len(msgs)) // promises never block, even after we return
	pending := map[int]bool{}
	sizes := make([]int, len(msgs))
	call := halt.New("kafka")
	for i, m := range msgs {
		if call.Skip(ctx, errs, i) {
			continue
		}
		rec, err := encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		sizes[i] = recordSize(rec)
		limit, unreachable, err := p.topicLimit(ctx, m.Topic)
		if err != nil {
			errs[i] = err
			if unreachable {
				call.Break(err)
			}
			continue
		}
		if sizes[i] > limit {
			errs[i] = tooLarge(m, sizes[i], limit, nil)
			continue
		}
		pending[i] = true
		p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { results <- produced{i, err} })
	}
	settle := func(r produced) {
		delete(pending, r.i)
		if r.err != nil {
			errs[r.i] = p.classify(msgs[r.i], sizes[r.i], r.err)
		}
	}
	for len(pending) > 0 {
		// A settled record wins over an ended ctx: a confirmed message
		// must not be reported as failed.
		select {
		case r := <-results:
			settle(r)
			continue
		default:
		}
		select {
		case r := <-results:
			settle(r)
		case <-ctx.Done():
			for i := range pending {
				errs[i] = txbox.Unavailable(fmt.Errorf("kafka: no acknowledgement for event %s on %q before the deadline: %w", msgs[i].Event.ID, msgs[i].Topic, ctx.Err()))
			}
			return errs
		}
	}
	return errs
}

// encode builds the record for m, or says why it can never be sent.
func encode(m broker.Message) (*kgo.Record, error) {
	if err := ValidateTopic(m.Topic); err != nil {
		return nil, txbox.Permanent(fmt.Errorf("kafka: event %s: %w", m.Event.ID, err))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return nil, err
	}
	hs := make([]kgo.RecordHeader, 0, len(attrs))
	for _, a := range attrs {
		if a[0] == broker.AttrDataContentType {
			// The binding maps datacontenttype to content-type, and only
			// there.
			hs = append(hs, kgo.RecordHeader{Key: headerContentType, Value: []byte(a[1])})
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: HeaderPrefix + a[0], Value: []byte(a[1])})
	}
	return &kgo.Record{Topic: m.Topic, Key: []byte(m.Event.AggregateID), Value: m.Event.Payload, Headers: hs}, nil
}

// recordSize is what the record adds to a batch: franz-go's count plus the
// record and batch framing, so a record over it is refused before it is
// handed over, with the same verdict franz-go would give.
func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n + 40 + 61 // record framing (varints, attributes) + batch header
}

func tooLarge(m broker.Message, size, limit int, cause error) error {
	var err error
	if size > limit {
		err = fmt.Errorf("kafka: event %s for %q is about %d bytes (payload %d + key and headers), over the topic's limit of %d bytes (max.message.bytes)",
			m.Event.ID, m.Topic, size, len(m.Event.Payload), limit)
	} else {
		err = fmt.Errorf("kafka: the broker refused event %s for %q as too large: it is about %d bytes (payload %d + key and headers), under the limit of %d bytes known here; the topic's max.message.bytes or the broker's message.max.bytes must be lower",
			m.Event.ID, m.Topic, size, len(m.Event.Payload), limit)
	}
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return txbox.Permanent(err)
}

// classify maps a produce failure to txbox's classes: what the record
// itself makes impossible (its size, its topic's name, its content) is
// permanent; what the cluster refuses for a state of its own (the topic
// deleted or not yet visible, an ACL, a partition without a leader or
// enough replicas until the deadline) is an outage, which spends none of
// the event's attempts, since a topic deleted for an hour would otherwise
// send every event to DEAD.
func (p *Publisher) classify(m broker.Message, size int, err error) error {
	var kerrE *kerr.Error
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		limit := p.knownLimit(m.Topic)
		p.forget(m.Topic) // the topic's limit may have changed: look it up again
		return tooLarge(m, size, limit, err)
	case errors.Is(err, kerr.InvalidTopicException):
		return txbox.Permanent(fmt.Errorf("kafka: the cluster refuses topic %q: %w", m.Topic, err))
	case errors.Is(err, kerr.InvalidRecord):
		return txbox.Permanent(fmt.Errorf("kafka: the cluster refuses event %s on %q as an invalid record: %w", m.Event.ID, m.Topic, err))
	case notAuthorized(err):
		return txbox.Unavailable(fmt.Errorf("kafka: not authorized to write to topic %q (ACL): %w", m.Topic, err))
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		// It existed when we looked; it was deleted since (and maybe
		// created again), or a new topic is not visible everywhere yet.
		// The next call looks again.
		p.forget(m.Topic)
		p.purge(m.Topic)
		return txbox.Unavailable(fmt.Errorf("kafka: topic %q is unknown to the partition leader (deleted, or not yet visible?): %w", m.Topic, err))
	case errors.As(err, &kerrE) && !kerrE.Retriable:
		// The cluster answered and said no for a reason not known here
		// (a broker policy, an unsupported format): the relay's retries
		// and attempt limit decide.
		return fmt.Errorf("kafka: the cluster refused event %s on %q: %w", m.Event.ID, m.Topic, err)
	default:
		// Context ends, record timeouts, connection errors, retriable
		// broker errors that outlasted the deadline (no leader, not
		// enough replicas, a storage error), a closed client.
		return txbox.Unavailable(fmt.Errorf("kafka: publish event %s to %q: %w", m.Event.ID, m.Topic, err))
	}
}

// notAuthorized reports an ACL refusal, of the topic or of the cluster
// (the idempotent producer needs IDEMPOTENT_WRITE on it), or failed
// authentication.
func notAuthorized(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed)
}

// purge makes the client drop what it holds of topic for producing, in
// the background, since it waits for the client's metadata loop. franz-go
// keeps the id of a topic it produced to and fails a topic deleted and
// created again under the same name (a new id) with UNKNOWN_TOPIC_ID until
// the topic is purged: without this, that outage would never end.
func (p *Publisher) purge(topic string) {
	if _, busy := p.purging.LoadOrStore(topic, true); busy {
		return
	}
	go func() {
		defer p.purging.Delete(topic)
		p.cl.PurgeTopicsFromProducing(topic)
	}()
}

func (p *Publisher) forget(topic string) {
	p.mu.Lock()
	delete(p.topics, topic)
	p.mu.Unlock()
}

func (p *Publisher) knownLimit(topic string) int {
	return int(p.batchMax(topic))
}

// topicLimit checks, once per topic, that the topic exists (creating it
// with CreateTopics) and learns its record limit. unreachable reports that
// no broker answered, which fails the rest of the call; a topic the
// cluster says is missing or forbidden is an outage of that topic only.
func (p *Publisher) topicLimit(ctx context.Context, topic string) (limit int, unreachable bool, err error) {
	p.mu.Lock()
	limit, ok := p.topics[topic]
	p.mu.Unlock()
	if ok {
		return limit, false, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return 0, true, txbox.Unavailable(fmt.Errorf("kafka: look up topic %q: %w", topic, err))
	}
	var code error = kerr.UnknownTopicOrPartition
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			code = kerr.ErrorForCode(t.ErrorCode)
		}
	}
	switch {
	case code == nil:
	case errors.Is(code, kerr.UnknownTopicOrPartition) && p.opts.CreateTopics:
		if unreachable, err := p.createTopic(ctx, topic); err != nil {
			return 0, unreachable, err
		}
	case errors.Is(code, kerr.UnknownTopicOrPartition):
		return 0, false, txbox.Unavailable(fmt.Errorf("kafka: topic %q does not exist (deleted, or not yet created?); create it, or let txbox create topics (--kafka-create-topics, Options.CreateTopics): %w", topic, code))
	case errors.Is(code, kerr.InvalidTopicException):
		return 0, false, txbox.Permanent(fmt.Errorf("kafka: the cluster refuses topic %q: %w", topic, code))
	case notAuthorized(code):
		return 0, false, txbox.Unavailable(fmt.Errorf("kafka: not authorized to use topic %q (ACL): %w", topic, code))
	case kerr.IsRetriable(code):
		// LEADER_NOT_AVAILABLE and the like: the topic exists; producing
		// waits for its leader within the deadline.
	default:
		return 0, false, fmt.Errorf("kafka: look up topic %q: %w", topic, code)
	}
	limit = p.describeLimit(ctx, topic)
	p.limits.Store(topic, int32(limit))
	p.mu.Lock()
	p.topics[topic] = limit
	p.mu.Unlock()
	return limit, false, nil
}

// createTopic creates topic; one that exists already (another relay was
// first) is fine. A topic the cluster will not create for a reason of its
// own (an ACL, more replicas than brokers, a policy) is an outage, not the
// event's failure: every event bound for it would fail alike. unreachable
// reports that no broker answered.
func (p *Publisher) createTopic(ctx context.Context, topic string) (unreachable bool, err error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	if p.opts.Partitions > 0 {
		rt.NumPartitions = p.opts.Partitions
	}
	if p.opts.ReplicationFactor > 0 {
		rt.ReplicationFactor = p.opts.ReplicationFactor
	}
	req.Topics = append(req.Topics, rt)
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(max(time.Until(d).Milliseconds(), 1))
	}
	resp, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return true, txbox.Unavailable(fmt.Errorf("kafka: create topic %q: %w", topic, err))
	}
	if len(resp.Topics) != 1 {
		return false, fmt.Errorf("kafka: create topic %q: %d topics in the answer", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	code := kerr.ErrorForCode(t.ErrorCode)
	msg := ""
	if t.ErrorMessage != nil {
		msg = " (" + *t.ErrorMessage + ")"
	}
	switch {
	case code == nil:
		p.log.Info("kafka: created topic", "topic", topic, "partitions", t.NumPartitions, "replication_factor", t.ReplicationFactor)
		return false, nil
	case errors.Is(code, kerr.TopicAlreadyExists):
		return false, nil
	case errors.Is(code, kerr.InvalidTopicException):
		return false, txbox.Permanent(fmt.Errorf("kafka: the cluster refuses topic %q: %w%s", topic, code, msg))
	case notAuthorized(code):
		return false, txbox.Unavailable(fmt.Errorf("kafka: not authorized to create topic %q (ACL): %w%s", topic, code, msg))
	case kerr.IsRetriable(code):
		return false, txbox.Unavailable(fmt.Errorf("kafka: create topic %q: %w%s", topic, code, msg))
	default:
		return false, txbox.Unavailable(fmt.Errorf("kafka: cannot create topic %q with %s partitions and replication factor %s: %w%s",
			topic, orBrokerDefault(int(p.opts.Partitions)), orBrokerDefault(int(p.opts.ReplicationFactor)), code, msg))
	}
}

func orBrokerDefault(n int) string {
	if n <= 0 {
		return "the broker's default"
	}
	return strconv.Itoa(n)
}

// describeLimit reads the topic's max.message.bytes; without an answer it
// keeps MaxPayload and lets the broker judge.
func (p *Publisher) describeLimit(ctx context.Context, topic string) int {
	limit := p.opts.MaxPayload
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	rr.ConfigNames = []string{"max.message.bytes"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		p.log.Debug("kafka: cannot read max.message.bytes", "topic", topic, "err", err)
		return limit
	}
	for _, r := range resp.Resources {
		if kerr.ErrorForCode(r.ErrorCode) != nil {
			continue
		}
		for _, c := range r.Configs {
			if c.Name != "max.message.bytes" || c.Value == nil {
				continue
			}
			if n, err := strconv.Atoi(strings.TrimSpace(*c.Value)); err == nil && n >= 512 && n < limit {
				limit = n
			}
		}
	}
	return limit
}
