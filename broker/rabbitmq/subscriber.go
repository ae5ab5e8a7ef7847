package rabbitmqbroker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/receive"
)

// SubscriberOptions configure a consumer of one durable queue.
type SubscriberOptions struct {
	// Queue is the durable queue, one per consuming service (the inbox's
	// consumer name): RabbitMQ keeps a consumer's position as the messages
	// in its queue, so the queue must be bound before events are published
	// to be kept for it. Required.
	Queue string
	// Exchange the queue is bound to. Default "txbox".
	Exchange string
	// CreateExchange declares Exchange (durable, of ExchangeType) first.
	CreateExchange bool
	// ExchangeType of a declared exchange. Default "topic".
	ExchangeType string
	// BindingKeys bind the queue to Exchange ("outbox.Order.*",
	// "outbox.#"). Existing bindings stay.
	BindingKeys []string
	// Passive only checks that Queue exists: nothing is declared or bound
	// (for a topology managed elsewhere).
	Passive bool
	// QueueArgs are the x-arguments of a declared queue, e.g.
	// {"x-queue-type": "quorum"}. They must match an existing queue's.
	QueueArgs amqp.Table
	// SingleActiveConsumer declares the queue with
	// x-single-active-consumer, so that several subscriber processes fail
	// over without breaking per-key order. Only applies when the queue is
	// created.
	SingleActiveConsumer bool
	// MaxAckPending caps unacknowledged deliveries on the channel (the
	// AMQP prefetch count). Default 128.
	MaxAckPending int
	// AckWait, when > 0, requeues a delivery that is neither acked nor
	// Nak'd within it, as a JetStream ack wait would. RabbitMQ itself only
	// requeues when the channel closes. Default 0 (off).
	AckWait time.Duration
	// Connection is how to reach the broker, the same as in Options.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *SubscriberOptions) withDefaults() error {
	if o.Queue == "" {
		return &txbox.ConfigError{Field: "AMQP queue", Reason: "empty"}
	}
	if len(o.Queue) > 200 {
		return &txbox.ConfigError{Field: "AMQP queue", Reason: fmt.Sprintf("queue name of %d bytes leaves no room for its retry queues (at most 200)", len(o.Queue))}
	}
	o.Exchange = cmp.Or(o.Exchange, DefaultExchange)
	o.ExchangeType = cmp.Or(o.ExchangeType, DefaultExchangeType)
	o.MaxAckPending = cmp.Or(o.MaxAckPending, defaultMaxAckPending)
	o.Connection.withDefaults("txbox-subscriber")
	return nil
}

// Subscriber consumes one durable queue. A lost connection fails the
// Receive in progress with txbox.ErrBrokerUnavailable and the next Receive
// dials again; the broker requeues whatever was unacked.
type Subscriber struct {
	url  string
	opts SubscriberOptions
	log  *slog.Logger
	tag  string

	dialing chan struct{}
	mu      sync.Mutex
	sess    *session
	closed  bool
}

var _ broker.Subscriber = (*Subscriber)(nil)

// session is one connection and its consuming channel; deliveries belong
// to the session they came on.
type session struct {
	link       *link
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	returns    chan amqp.Return
	closes     chan *amqp.Error

	mu sync.Mutex // serializes use of ch (not safe for concurrent use)
}

// OpenSubscriber connects to url, declares the queue and its bindings (or
// with Passive checks the queue) and starts consuming. Errors are as for
// Open; a queue that exists with other arguments is a *txbox.ConfigError.
func OpenSubscriber(ctx context.Context, url string, opts SubscriberOptions) (*Subscriber, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Subscriber{url: url, opts: opts, log: opts.Logger, tag: opts.Name + "-" + hex.EncodeToString(b[:]), dialing: make(chan struct{}, 1)}
	if _, err := s.session(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// session returns the live session, or connects and starts consuming.
func (s *Subscriber) session(ctx context.Context) (*session, error) {
	select {
	case s.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.dialing }()
	s.mu.Lock()
	cur, closed := s.sess, s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("rabbitmq: subscriber is closed")
	}
	if cur != nil && !cur.ch.IsClosed() {
		return cur, nil
	}
	if cur != nil {
		go func() { _ = cur.link.conn.Close() }()
	}
	l, err := dial(ctx, s.opts.dialConfig(s.url))
	if err != nil {
		return nil, err
	}
	sess := &session{link: l}
	o := s.opts
	err = rpc(ctx, l, "start consuming", func() error {
		ch, err := l.conn.Channel()
		if err != nil {
			return err
		}
		sess.ch = ch
		if err := ch.Confirm(false); err != nil {
			return err
		}
		if err := ch.Qos(o.MaxAckPending, 0, false); err != nil {
			return err
		}
		if o.CreateExchange {
			if err := ch.ExchangeDeclare(o.Exchange, o.ExchangeType, true, false, false, false, nil); err != nil {
				return fmt.Errorf("declare exchange %q: %w", o.Exchange, err)
			}
		}
		if o.Passive {
			if _, err := ch.QueueDeclarePassive(o.Queue, true, false, false, false, nil); err != nil {
				return fmt.Errorf("queue %q: %w", o.Queue, err)
			}
		} else {
			args := maps.Clone(o.QueueArgs)
			if o.SingleActiveConsumer {
				if args == nil {
					args = amqp.Table{}
				}
				args["x-single-active-consumer"] = true
			}
			if _, err := ch.QueueDeclare(o.Queue, true, false, false, false, args); err != nil {
				return fmt.Errorf("declare queue %q: %w", o.Queue, err)
			}
			for _, k := range o.BindingKeys {
				if err := ch.QueueBind(o.Queue, k, o.Exchange, false, nil); err != nil {
					return fmt.Errorf("bind queue %q to exchange %q with key %q: %w", o.Queue, o.Exchange, k, err)
				}
			}
		}
		sess.returns = ch.NotifyReturn(make(chan amqp.Return, 16))
		sess.closes = ch.NotifyClose(make(chan *amqp.Error, 1))
		sess.deliveries, err = ch.Consume(o.Queue, s.tag, false, false, false, false, nil)
		if err != nil {
			return fmt.Errorf("consume queue %q: %w", o.Queue, err)
		}
		return nil
	})
	if err != nil {
		go func() { _ = l.conn.Close() }()
		return nil, declareErr("AMQP queue", "subscribe", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go func() { _ = l.conn.Close() }()
		return nil, fmt.Errorf("rabbitmq: subscriber is closed")
	}
	if s.sess != nil {
		s.log.Info("rabbitmq: consuming again", "queue", o.Queue)
	}
	s.sess = sess
	return sess, nil
}

// Receive returns the deliveries the channel has ready, up to max, or else
// waits for the first one and takes whatever arrived with it.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	if err := deadline.Ended(ctx); err != nil {
		return nil, err
	}
	sess, err := s.session(ctx)
	if err != nil {
		if err := deadline.Ended(ctx); err != nil {
			return nil, err
		}
		if !errors.Is(err, txbox.ErrBrokerUnavailable) {
			err = txbox.Unavailable(fmt.Errorf("rabbitmq: subscribe again: %w", err))
		}
		return nil, err
	}
	var out []broker.Delivery
	select {
	case d, ok := <-sess.deliveries:
		if !ok {
			// The channel closed, or the broker cancelled the consumer
			// (queue deleted): the next Receive subscribes again.
			s.drop(sess)
			return nil, txbox.Unavailable(fmt.Errorf("rabbitmq: receive: %w", sess.cause()))
		}
		out = append(out, s.wrap(sess, d))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < max {
		select {
		case d, ok := <-sess.deliveries:
			if !ok {
				return out, nil
			}
			out = append(out, s.wrap(sess, d))
		default:
			return out, nil
		}
	}
	return out, nil
}

// drop forgets a session whose consumer ended.
func (s *Subscriber) drop(sess *session) {
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
	}
	s.mu.Unlock()
	go func() { _ = sess.link.conn.Close() }()
}

func (sess *session) cause() error {
	select {
	case err, ok := <-sess.closes:
		if ok && err != nil {
			return err
		}
	default:
	}
	return amqp.ErrClosed
}

func (s *Subscriber) wrap(sess *session, d amqp.Delivery) *delivery {
	dl := &delivery{s: s, sess: sess, d: d}
	if s.opts.AckWait > 0 {
		dl.lease = time.AfterFunc(s.opts.AckWait, dl.expire)
	}
	return dl
}

// Close closes the connection; the broker requeues unacked deliveries. The
// queue stays, with its messages, for the next run.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	sess := s.sess
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already || sess == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { _ = sess.link.conn.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.ConnectTimeout):
		sess.link.abort()
	}
	return nil
}

type state int

const (
	pending state = iota
	settled
	expired
)

type delivery struct {
	s     *Subscriber
	sess  *session
	d     amqp.Delivery
	lease *time.Timer
	state state // guarded by sess.mu
}

// Event decodes the cloudEvents_ (or cloudEvents:) headers and body.
func (d *delivery) Event() (txbox.Event, error) { return decode(&d.d) }

// Raw keeps the original routing key, headers (values in their canonical
// string form; AMQP properties as "amqp.content_type" and
// "amqp.message_id") and body. ID is the message_id, or the queue and
// delivery tag when a foreign producer set none.
func (d *delivery) Raw() broker.RawMessage {
	h := map[string]string{}
	for k, v := range d.d.Headers {
		if s, ok := headerString(v); ok {
			h[k] = s
		} else {
			h[k] = fmt.Sprint(v)
		}
	}
	if d.d.ContentType != "" {
		h["amqp.content_type"] = d.d.ContentType
	}
	if d.d.MessageId != "" {
		h["amqp.message_id"] = d.d.MessageId
	}
	id := d.d.MessageId
	if id == "" {
		id = fmt.Sprintf("%s#%d", d.s.opts.Queue, d.d.DeliveryTag)
	}
	return broker.RawMessage{Topic: d.topic(), ID: id, Headers: h, Body: append([]byte(nil), d.d.Body...)}
}

// topic is the routing key the message was published with, also for a
// retry copy, which travels under its retry queue's name.
func (d *delivery) topic() string {
	if t, ok := d.d.Headers[headerTopic].(string); ok && t != "" {
		return t
	}
	return d.d.RoutingKey
}

// Attempt is 1, plus the Nak'd retries the copy carries, plus the broker's
// count of returns (x-delivery-count on quorum queues; the redelivered flag,
// counted once, on classic queues).
func (d *delivery) Attempt() int {
	n := int64(1)
	if v, ok := headerInt(d.d.Headers[headerAttempt]); ok && v > 1 {
		n = v
	}
	if v, ok := headerInt(d.d.Headers["x-delivery-count"]); ok && v > 0 {
		n += v
	} else if d.d.Redelivered {
		n++
	}
	return int(min(n, math.MaxInt32))
}

// settleable checks, under sess.mu, that the delivery can still be settled
// on its channel.
func (d *delivery) settleable(what string) error {
	switch d.state {
	case settled:
		return fmt.Errorf("rabbitmq: %s: delivery %d was already settled", what, d.d.DeliveryTag)
	case expired:
		return fmt.Errorf("rabbitmq: %s: delivery %d was requeued after the ack wait of %v; it will come again", what, d.d.DeliveryTag, d.s.opts.AckWait)
	}
	if d.sess.ch.IsClosed() {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: %w", what, fmt.Errorf("the channel closed (%v); the broker requeues the message", d.sess.cause())))
	}
	return nil
}

func (d *delivery) stopLease() {
	if d.lease != nil {
		d.lease.Stop()
	}
}

// Ack acknowledges the delivery. AMQP 0-9-1 does not confirm an ack: if
// the connection drops before the broker reads it, the message comes back
// and the inbox absorbs it.
func (d *delivery) Ack(ctx context.Context) error {
	d.sess.mu.Lock()
	defer d.sess.mu.Unlock()
	if err := d.settleable("ack"); err != nil {
		return err
	}
	d.stopLease()
	if err := d.sess.ch.Ack(d.d.DeliveryTag, false); err != nil {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: ack: %w", err))
	}
	d.state = settled
	return nil
}

// Nak asks for redelivery after delay. With delay <= 0 the message is
// requeued at once, in its place. Otherwise a copy goes to the retry queue
// for the delay (rounded up to a step of retryDelay) and, once the broker
// confirmed it, the delivery is acked; the copy comes back to the tail of
// this queue when its TTL expires. If the copy cannot be parked the
// delivery is requeued at once and the error says so.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	d.sess.mu.Lock()
	defer d.sess.mu.Unlock()
	if err := d.settleable("nak"); err != nil {
		return err
	}
	d.stopLease()
	ch := d.sess.ch
	if delay <= 0 {
		if err := ch.Nack(d.d.DeliveryTag, false, true); err != nil {
			return txbox.Unavailable(fmt.Errorf("rabbitmq: nak: %w", err))
		}
		d.state = settled
		return nil
	}
	err := d.park(ctx, delay)
	if err == nil {
		if err := ch.Ack(d.d.DeliveryTag, false); err != nil {
			return txbox.Unavailable(fmt.Errorf("rabbitmq: ack after parking the retry copy: %w", err))
		}
		d.state = settled
		return nil
	}
	if ch.IsClosed() {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: nak: %w", err))
	}
	if nerr := ch.Nack(d.d.DeliveryTag, false, true); nerr != nil {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: nak: %w", errors.Join(err, nerr)))
	}
	d.state = settled
	return fmt.Errorf("rabbitmq: nak: %w; requeued at once instead", err)
}

// park publishes the retry copy and waits for its confirm.
func (d *delivery) park(ctx context.Context, delay time.Duration) error {
	ttl := retryDelay(delay)
	main := d.s.opts.Queue
	q := RetryQueueName(main, ttl)
	ms := ttl.Milliseconds()
	args := amqp.Table{
		"x-message-ttl":             ms,
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": main,
		// Redeclared at every Nak, so it outlives every copy in it.
		"x-expires": min(2*ms+60_000, math.MaxUint32),
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	ch := d.sess.ch
	if err := rpc(ctx, d.sess.link, "declare retry queue "+q, func() error {
		_, err := ch.QueueDeclare(q, true, false, false, false, args)
		return err
	}); err != nil {
		return fmt.Errorf("declare retry queue %q: %w", q, err)
	}
	h := make(amqp.Table, len(d.d.Headers)+2)
	for k, v := range d.d.Headers {
		if k == "x-death" || strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-") || k == "x-delivery-count" {
			continue
		}
		h[k] = v
	}
	h[headerAttempt] = int64(d.Attempt() + 1)
	h[headerTopic] = d.topic()
	dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
		Headers: h, ContentType: d.d.ContentType, ContentEncoding: d.d.ContentEncoding, DeliveryMode: amqp.Persistent,
		Priority: d.d.Priority, CorrelationId: d.d.CorrelationId, ReplyTo: d.d.ReplyTo, MessageId: d.d.MessageId,
		Timestamp: d.d.Timestamp, Type: d.d.Type, AppId: d.d.AppId, Body: d.d.Body,
	})
	if err != nil {
		return fmt.Errorf("publish to retry queue %q: %w", q, err)
	}
	// The client closes the returns channel with the channel: from then on
	// it is nil here, so that a closed channel is not read forever.
	returns := d.sess.returns
	var returned bool
	receive := func(ok bool) {
		if ok {
			returned = true
		} else {
			returns = nil
		}
	}
	for {
		select {
		case <-dc.Done():
		drain:
			for returns != nil {
				select {
				case _, ok := <-returns:
					receive(ok)
				default:
					break drain
				}
			}
			switch {
			case returned:
				return fmt.Errorf("retry queue %q vanished before the copy reached it", q)
			case !dc.Acked():
				return fmt.Errorf("the broker did not confirm the copy in retry queue %q", q)
			}
			return nil
		case _, ok := <-returns:
			receive(ok)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the confirm of the copy in retry queue %q: %w", q, ctx.Err())
		}
	}
}

// expire requeues a delivery whose ack wait passed.
func (d *delivery) expire() {
	d.sess.mu.Lock()
	defer d.sess.mu.Unlock()
	if d.state != pending || d.sess.ch.IsClosed() {
		return
	}
	if err := d.sess.ch.Nack(d.d.DeliveryTag, false, true); err != nil {
		return
	}
	d.state = expired
}

// retrySteps are the delays, per decade, that a Nak's delay is rounded up
// to: at most a third longer than asked, and few retry queues.
var retrySteps = []int64{10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100}

// retryDelay rounds d up to a retry step (10 ms at least, about 49 days at
// most: RabbitMQ's TTL limit).
func retryDelay(d time.Duration) time.Duration {
	ms := max(d.Milliseconds(), 10)
	if d > time.Duration(ms)*time.Millisecond {
		ms++ // round sub-millisecond remainders up
	}
	const maxTTL = math.MaxUint32
	if ms >= maxTTL {
		return maxTTL * time.Millisecond
	}
	scale := int64(1)
	for ms > 100*scale {
		scale *= 10
	}
	// ms is in (10*scale, 100*scale] or below 10*scale only when scale is 1.
	for _, s := range retrySteps {
		if s*scale >= ms {
			return time.Duration(min(s*scale, maxTTL)) * time.Millisecond
		}
	}
	return time.Duration(ms) * time.Millisecond
}

// RetryQueueName is the retry queue for delay of a consumer's queue.
func RetryQueueName(queue string, delay time.Duration) string {
	return fmt.Sprintf("%s.retry.%dms", queue, delay.Milliseconds())
}

// AckWait is how long a delivery may stay unsettled before the adapter
// requeues it (broker.AckWaiter); 0: only a lost channel does.
func (s *Subscriber) AckWait() time.Duration { return s.opts.AckWait }

var _ broker.AckWaiter = (*Subscriber)(nil)
