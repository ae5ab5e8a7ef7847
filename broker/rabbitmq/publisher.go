package rabbitmqbroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/internal/redact"
)

// Options configure a Publisher. The zero value publishes to the existing
// exchange "txbox".
type Options struct {
	// Exchange messages are published to, with routing key = topic.
	// Default "txbox".
	Exchange string
	// CreateExchange declares Exchange at Open (durable, of ExchangeType),
	// which succeeds when it exists with the same type. Without it, Open
	// only checks that the exchange exists.
	CreateExchange bool
	// ExchangeType of a declared exchange. Default "topic".
	ExchangeType string
	// MaxPayload is the largest body published, in bytes; a larger one
	// fails permanently. Keep it at or below the broker's max_message_size,
	// which otherwise closes the channel. Default 16 MiB.
	MaxPayload int
	// MaxChannels bounds concurrent Publish calls: each holds one channel
	// of the connection for the call. Default 8.
	MaxChannels int
	// Connection is how to reach the broker, the same as in
	// SubscriberOptions.
	Connection
}

// withDefaults fills the fields left zero.
func (o *Options) withDefaults() {
	o.Exchange = cmp.Or(o.Exchange, DefaultExchange)
	o.ExchangeType = cmp.Or(o.ExchangeType, DefaultExchangeType)
	o.MaxPayload = cmp.Or(o.MaxPayload, DefaultMaxPayload)
	o.MaxChannels = cmp.Or(o.MaxChannels, defaultMaxChannels)
	o.Connection.withDefaults("txbox-publisher")
}

// Publisher publishes to one exchange through one connection, dialled
// again by the first Publish after it is lost. It is safe for concurrent
// use; each call publishes on a confirm-mode channel of its own, so per-key
// order holds as long as a key is not in two concurrent calls (the relay
// never does that).
type Publisher struct {
	url   string
	opts  Options
	log   *slog.Logger
	slots chan struct{} // one per concurrent call

	dialing chan struct{} // held while (re)connecting
	mu      sync.Mutex
	link    *link
	idle    []*pubChannel
	closed  bool

	frameMax atomic.Int64
	returns  atomic.Uint64
}

var _ broker.Publisher = (*Publisher)(nil)

type pubChannel struct {
	link    *link
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error

	mu  sync.Mutex
	err *amqp.Error
}

// cause is why the channel closed, as the broker or the connection said.
// The client queues it before it fails the pending confirms.
func (pc *pubChannel) cause() error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.err == nil {
		select {
		case err, ok := <-pc.closes:
			if ok && err != nil {
				pc.err = err
			}
		default:
		}
	}
	if pc.err != nil {
		return pc.err
	}
	return amqp.ErrClosed
}

// Open connects to url (amqp:// or amqps://, which may carry
// user:password; it is never logged or returned in clear) and checks, or
// with CreateExchange declares, the exchange. An unreachable server is reported
// with txbox.ErrBrokerUnavailable, a bad URL, refused credentials or a
// missing exchange with a *txbox.ConfigError.
func Open(ctx context.Context, url string, opts Options) (*Publisher, error) {
	opts.withDefaults()
	p := &Publisher{url: url, opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxChannels), dialing: make(chan struct{}, 1)}
	p.frameMax.Store(131072)
	pc, err := p.channel(ctx)
	if err != nil {
		return nil, err
	}
	ex := opts.Exchange
	err = rpc(ctx, pc.link, "declare exchange "+ex, func() error {
		if opts.CreateExchange {
			return pc.ch.ExchangeDeclare(ex, opts.ExchangeType, true, false, false, false, nil)
		}
		return pc.ch.ExchangeDeclarePassive(ex, opts.ExchangeType, true, false, false, false, nil)
	})
	if err != nil {
		p.Close()
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return nil, &txbox.ConfigError{Field: "AMQP exchange", Reason: fmt.Sprintf("exchange %q does not exist; declare it or enable declaring (%v)", ex, err)}
		}
		return nil, declareErr("AMQP exchange", fmt.Sprintf("declare exchange %q (%s)", ex, opts.ExchangeType), err)
	}
	if opts.CreateExchange {
		p.log.Info("rabbitmq: declared exchange", "exchange", ex, "type", opts.ExchangeType)
	}
	p.release(pc)
	return p, nil
}

// MaxPayload is Options.MaxPayload.
func (p *Publisher) MaxPayload() int { return p.opts.MaxPayload }

// Returned counts messages the broker returned as unroutable.
func (p *Publisher) Returned() uint64 { return p.returns.Load() }

// channel takes an idle confirm-mode channel, or opens one, dialling first
// if the connection is gone.
func (p *Publisher) channel(ctx context.Context) (*pubChannel, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("rabbitmq: publisher is closed")
	}
	for len(p.idle) > 0 {
		pc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !pc.ch.IsClosed() {
			p.mu.Unlock()
			return pc, nil
		}
	}
	p.mu.Unlock()
	l, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	var pc *pubChannel
	err = rpc(ctx, l, "open channel", func() error {
		ch, err := l.conn.Channel()
		if err != nil {
			return err
		}
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return err
		}
		pc = &pubChannel{link: l, ch: ch,
			returns: ch.NotifyReturn(make(chan amqp.Return, 64)),
			closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, txbox.ErrBrokerUnavailable) {
			return nil, err
		}
		return nil, txbox.Unavailable(fmt.Errorf("rabbitmq: open channel: %w", err))
	}
	return pc, nil
}

// connection returns the live connection, dialling once if there is none.
func (p *Publisher) connection(ctx context.Context) (*link, error) {
	select {
	case p.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, txbox.Unavailable(fmt.Errorf("rabbitmq: wait for the connection: %w", ctx.Err()))
	}
	defer func() { <-p.dialing }()
	p.mu.Lock()
	l := p.link
	p.mu.Unlock()
	if l != nil && !l.closed() {
		return l, nil
	}
	l, err := dial(ctx, p.opts.dialConfig(p.url))
	if err != nil {
		return nil, err
	}
	if fm := l.conn.Config.FrameSize; fm > 0 {
		p.frameMax.Store(int64(fm))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = l.conn.Close()
		return nil, fmt.Errorf("rabbitmq: publisher is closed")
	}
	if p.link != nil {
		p.log.Info("rabbitmq: reconnected", "server", redact.URL(p.url))
	}
	p.link = l
	return l, nil
}

// release keeps a healthy channel for the next call.
func (p *Publisher) release(pc *pubChannel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || pc.ch.IsClosed() || pc.link != p.link {
		go pc.ch.Close()
		return
	}
	p.idle = append(p.idle, pc)
}

// Publish sends every message in slice order on one channel without
// waiting between them, then waits for each confirm.
//
// A message that cannot be sent as it is (bad routing key, payload over
// MaxPayload, bad header) fails with txbox.ErrPermanent and the others go
// on. One the broker returned as unroutable (no queue bound to its routing
// key) or nacked (a queue at its length limit with overflow
// reject-publish) fails with txbox.ErrBrokerUnavailable, and the others go
// on too: the queue is missing or full, which says nothing about the
// event. Once the connection fails, the rest of the call fails with
// txbox.ErrBrokerUnavailable and the next call dials again.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	pubs := make([]amqp.Publishing, len(msgs))
	maxHeaders := int(p.frameMax.Load()) - 1024
	for i, m := range msgs {
		pubs[i], errs[i] = encode(m, p.opts.MaxPayload, maxHeaders)
	}
	failRest := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := deadline.Ended(ctx); err != nil {
		return failRest(txbox.Unavailable(fmt.Errorf("rabbitmq: publish: %w", err)))
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return failRest(txbox.Unavailable(fmt.Errorf("rabbitmq: wait for a free channel: %w", ctx.Err())))
	}
	defer func() { <-p.slots }()
	pc, err := p.channel(ctx)
	if err != nil {
		if !errors.Is(err, txbox.ErrBrokerUnavailable) {
			// Credentials refused on a reconnection (a password rotated,
			// a user removed) stop the way out, not the event.
			err = txbox.Unavailable(fmt.Errorf("rabbitmq: reconnecting: %w", err))
		}
		return failRest(err)
	}
	if p.send(ctx, pc, msgs, pubs, errs) {
		p.release(pc)
	} else {
		go pc.ch.Close() // unconfirmed messages in flight: never reuse it
	}
	return errs
}

type inflight struct {
	i        int
	dc       *amqp.DeferredConfirmation
	returned *amqp.Return
}

// send publishes the encoded messages and fills in their results. It
// reports whether the channel may be used again.
func (p *Publisher) send(ctx context.Context, pc *pubChannel, msgs []broker.Message, pubs []amqp.Publishing, errs []error) bool {
	var window []*inflight
	var broken error
	// A write can block (TCP back-pressure, a broker blocking publishers on
	// a resource alarm) where only closing the socket frees it.
	var writing atomic.Bool
	writing.Store(true)
	stop := context.AfterFunc(ctx, func() {
		if writing.Load() {
			pc.link.abort()
		}
	})
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		if broken == nil {
			if err := deadline.Ended(ctx); err != nil {
				broken = txbox.Unavailable(fmt.Errorf("rabbitmq: publish: %w", err))
			} else if r := pc.link.blockedReason(); r != "" {
				broken = txbox.Unavailable(fmt.Errorf("rabbitmq: publish: %w", fmt.Errorf("the broker blocks publishing on this connection: %s", r)))
			}
		}
		if broken != nil {
			errs[i] = broken
			continue
		}
		dc, err := pc.ch.PublishWithDeferredConfirm(p.opts.Exchange, m.Topic, true, false, pubs[i])
		if err != nil {
			broken = p.lost(pc, fmt.Sprintf("publish event %s", m.Event.ID), err)
			errs[i] = broken
			continue
		}
		window = append(window, &inflight{i: i, dc: dc})
	}
	writing.Store(false)
	stop()

	// A return arrives before the ack of its message, in publish order.
	onReturn := func(r amqp.Return) {
		for _, f := range window {
			if f.returned == nil && f.dc != nil && r.MessageId == pubs[f.i].MessageId {
				f.returned = &r
				return
			}
		}
	}
	// The client closes the returns channel with the channel: from then
	// on it is nil here, so that a closed channel is not read forever.
	returns := pc.returns
	receive := func(r amqp.Return, ok bool) {
		if !ok {
			returns = nil
			return
		}
		onReturn(r)
	}
	drain := func() {
		for returns != nil {
			select {
			case r, ok := <-returns:
				receive(r, ok)
			default:
				return
			}
		}
	}
	healthy := broken == nil
	for k, f := range window {
	wait:
		for {
			select {
			case <-f.dc.Done():
				break wait
			default:
			}
			select {
			case <-f.dc.Done():
				break wait
			case r, ok := <-returns:
				receive(r, ok)
			case <-ctx.Done():
				// A settled confirm wins over the ended ctx.
				drain()
				for _, g := range window[k:] {
					select {
					case <-g.dc.Done():
						errs[g.i] = p.result(pc, msgs[g.i], g)
					default:
						errs[g.i] = txbox.Unavailable(fmt.Errorf("rabbitmq: waiting for the confirm of event %s: %w", msgs[g.i].Event.ID, ctx.Err()))
					}
				}
				return false
			}
		}
		drain()
		errs[f.i] = p.result(pc, msgs[f.i], f)
		if errs[f.i] != nil && !errors.Is(errs[f.i], txbox.ErrPermanent) {
			healthy = false
		}
	}
	return healthy && !pc.ch.IsClosed()
}

// result classifies one settled confirm.
func (p *Publisher) result(pc *pubChannel, m broker.Message, f *inflight) error {
	if f.returned != nil {
		p.returns.Add(1)
		r := f.returned
		return txbox.Unavailable(fmt.Errorf("rabbitmq: event %s: no queue is bound to routing key %q on exchange %q (queue deleted or not yet bound?); the broker returned it: %d %s",
			m.Event.ID, m.Topic, p.opts.Exchange, r.ReplyCode, r.ReplyText))
	}
	if f.dc.Acked() {
		return nil
	}
	if pc.ch.IsClosed() {
		return p.lost(pc, fmt.Sprintf("event %s was not confirmed", m.Event.ID), pc.cause())
	}
	return txbox.Unavailable(fmt.Errorf("rabbitmq: event %s for %q: the broker nacked it: a queue it routes to is full (length limit with overflow reject-publish) or failed", m.Event.ID, m.Topic))
}

// lost classifies a failed channel: the connection is gone (unavailable,
// and the next call dials again), or the broker closed only the channel
// with an exception. An exception for a state of the broker (the exchange
// deleted, access refused, a resource or internal error) is an outage; any
// other (PRECONDITION_FAILED, as for a message over max_message_size, which
// closes the channel under every message in flight) is retryable, with
// the text that says why.
func (p *Publisher) lost(pc *pubChannel, what string, err error) error {
	if pc.link.closed() {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: connection lost: %w", what, err))
	}
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Server {
		switch aerr.Code {
		case amqp.NotFound:
			return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: the exchange %q does not exist (deleted?): %w", what, p.opts.Exchange, err))
		case amqp.AccessRefused, amqp.NotAllowed, amqp.ResourceLocked, amqp.ResourceError, amqp.InternalError, amqp.ConnectionForced:
			return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: the broker closed the channel: %w", what, err))
		}
		return fmt.Errorf("rabbitmq: %s: the broker closed the channel: %w", what, err)
	}
	return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: %w", what, err))
}

// Close closes the connection. Calls in progress fail with
// txbox.ErrBrokerUnavailable.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.idle = nil
	if p.link != nil {
		l := p.link
		done := make(chan struct{})
		go func() { _ = l.conn.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(p.opts.ConnectTimeout):
			l.abort()
		}
	}
	return nil
}
