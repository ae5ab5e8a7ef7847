package mqttbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/halt"
)

// Options configure a Publisher. The zero value works.
type Options struct {
	// ClientID of the publisher's connection, which always starts clean.
	// Default "txbox-relay-" plus random hex. A fixed one (for broker ACLs)
	// must differ between relay processes: the broker drops the older of
	// two connections with one client id.
	ClientID string
	// AckTimeout bounds the wait for PUBACKs even when the caller's context
	// has no deadline. Default 30s.
	AckTimeout time.Duration
	// MaxPayload, when > 0, fails larger payloads permanently before they
	// are sent. Set it to the broker's own payload limit (Mosquitto's
	// message_size_limit, which it reports only as reason 0x83). The
	// server's Maximum Packet Size, if it announces one, is always checked.
	MaxPayload int
	// AssumePersistent declares that the broker keeps confirmed messages
	// across a restart (for subscriptions that existed when they were
	// published). It changes nothing in the publisher: it is what the
	// conformance suite is told to expect.
	AssumePersistent bool
	// RequireSubscribers makes a PUBACK with reason 0x10 (no matching
	// subscribers: the broker dropped the message) a failure of the way
	// out (txbox.ErrBrokerUnavailable: no attempt spent, never DEAD)
	// instead of a confirmation.
	RequireSubscribers bool
	// Connection is how to reach the broker, the same as in
	// SubscriberOptions.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *Options) withDefaults() error {
	if o.ClientID == "" {
		o.ClientID = randomID("txbox-relay-")
	}
	if err := checkString(o.ClientID); err != nil {
		return &txbox.ConfigError{Field: "MQTT client id", Reason: err.Error()}
	}
	o.AckTimeout = defaults.Positive(o.AckTimeout, defaultAckTimeout)
	o.Connection.withDefaults()
	return nil
}

// Publisher publishes with QoS 1 over one MQTT 5 connection, made at Open
// and made again, lazily, by the first Publish after it was lost. It never
// queues while disconnected: a Publish without a connection, or whose
// connection drops, fails with txbox.ErrBrokerUnavailable at once. It is
// safe for concurrent use.
type Publisher struct {
	ep   endpoint
	opts Options
	log  *slog.Logger

	dialing lock
	mu      sync.Mutex
	cur     *conn
	gen     uint64
	closed  bool

	maxPacket atomic.Uint32
	noSubs    atomic.Uint64
}

var _ broker.Publisher = (*Publisher)(nil)

// Open connects to url (mqtt://[user:password@]host[:1883] or mqtts://...,
// also tcp://, ssl://, tls://; the password is never logged or returned in
// clear). An unreachable broker is reported with txbox.ErrBrokerUnavailable,
// a bad URL or refused credentials with a *txbox.ConfigError.
func Open(ctx context.Context, url string, opts Options) (*Publisher, error) {
	ep, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	p := &Publisher{ep: ep, opts: opts, log: opts.Logger, dialing: newLock()}
	if _, err := p.conn(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// conn returns the live connection, making one if there is none. One
// caller dials; the others wait for it, within their contexts.
func (p *Publisher) conn(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	c, closed := p.cur, p.closed
	p.mu.Unlock()
	if closed {
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: publish: %w", errors.New("publisher is closed")))
	}
	if c != nil && !c.dead() {
		return c, nil
	}
	if err := p.dialing.lock(ctx); err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: waiting for the connection to %s: %w", p.ep.redacted, err))
	}
	defer p.dialing.unlock()
	p.mu.Lock()
	c = p.cur
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	if c != nil {
		if !c.dead() {
			return c, nil // another caller reconnected
		}
		c.close()
		p.mu.Lock()
		if p.cur == c {
			p.cur = nil
		}
		p.mu.Unlock()
	}
	nc, err := dial(ctx, dialConfig{
		ep: p.ep, tls: p.opts.TLSConfig, clientID: p.opts.ClientID, cleanStart: true,
		receiveMaximum: defaultMaxAckPending, keepAlive: p.opts.KeepAlive, connectTimeout: p.opts.ConnectTimeout,
		edit: p.opts.ClientOptions, gen: gen, log: p.log,
		onLost: func(err error) {
			p.log.Warn("mqtt: publisher connection lost", "server", p.ep.redacted, "err", err)
		},
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		go nc.close()
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: publish: %w", errors.New("publisher is closed")))
	}
	if gen > 1 {
		p.log.Info("mqtt: publisher reconnected", "server", p.ep.redacted)
	}
	p.cur = nc
	p.maxPacket.Store(nc.serverMaxPacket())
	return nc, nil
}

// MaxPayload is Options.MaxPayload, or else the server's Maximum Packet
// Size (headers and payload together), or 0 when neither is known.
func (p *Publisher) MaxPayload() int {
	limit := p.opts.MaxPayload
	if mp := int(p.maxPacket.Load()); mp > 0 && (limit <= 0 || mp < limit) {
		limit = mp
	}
	return limit
}

// NoSubscribers counts confirmed publishes the broker reported (reason
// 0x10) as matching no subscription: dropped, with nobody to receive them.
func (p *Publisher) NoSubscribers() uint64 { return p.noSubs.Load() }

// Publish sends every message in slice order without waiting between them,
// as many unacknowledged at a time as the server's Receive Maximum allows,
// then waits for each PUBACK.
//
// A message that cannot be sent as it is (bad topic, bad attribute value,
// over a size limit) or that the broker refuses for itself (PUBACK reason
// 0x90, 0x95, 0x99) fails with txbox.ErrPermanent and the others go on. One
// the broker refuses for a state of its own (0x87 not authorized, 0x97
// quota exceeded, and with RequireSubscribers 0x10 no subscribers) fails
// with txbox.ErrBrokerUnavailable, and the others go on too. Once the
// connection fails, the rest of the call is not sent and fails with
// txbox.ErrBrokerUnavailable, so that a later message of a key is not
// handed over while an earlier one is lost in a broken connection.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(txbox.Unavailable(fmt.Errorf("mqtt: publish: %w", err)))
	}
	c, err := p.conn(ctx)
	if err != nil {
		if !errors.Is(err, txbox.ErrBrokerUnavailable) {
			// A CONNECT refused on a reconnection (credentials changed,
			// client banned) stops the way out, not the event.
			err = txbox.Unavailable(fmt.Errorf("mqtt: reconnecting: %w", err))
		}
		return fail(err)
	}
	type sent struct {
		i   int
		ret chan packets.ControlPacket
	}
	var window []sent
	call := halt.New("mqtt")
	for i, m := range msgs {
		if call.Skip(ctx, errs, i) {
			continue
		}
		pb, err := p.encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		ret := make(chan packets.ControlPacket, 1)
		// AddToSession waits for a slot under the server's Receive Maximum
		// and assigns the packet id; the PUBACK will be sent to ret.
		if err := c.state.AddToSession(ctx, pb, ret); err != nil {
			if errors.Is(err, session.ErrNoConnection) {
				errs[i] = call.Break(txbox.Unavailable(fmt.Errorf("mqtt: publish: %w", errors.New("connection lost"))))
			} else {
				errs[i] = call.Break(txbox.Unavailable(fmt.Errorf("mqtt: waiting for a free in-flight slot (the server's Receive Maximum): %w", err)))
			}
			continue
		}
		if _, err := pb.WriteTo(c.net); err != nil {
			errs[i] = call.Break(txbox.Unavailable(fmt.Errorf("mqtt: send event %s: %w", m.Event.ID, err)))
			_ = c.cli.Disconnect(&paho.Disconnect{ReasonCode: 0}) // the write may have been partial
			continue
		}
		window = append(window, sent{i: i, ret: ret})
	}
	if len(window) == 0 {
		return errs
	}
	wctx, cancel := context.WithTimeout(ctx, p.opts.AckTimeout)
	defer cancel()
	for _, s := range window {
		m := msgs[s.i]
		select {
		case r := <-s.ret:
			errs[s.i] = p.result(m, r)
			continue
		default:
		}
		select {
		case r := <-s.ret:
			errs[s.i] = p.result(m, r)
		case <-c.cli.Done():
			select {
			case r := <-s.ret: // acknowledged just before the connection went
				errs[s.i] = p.result(m, r)
			default:
				errs[s.i] = txbox.Unavailable(fmt.Errorf("mqtt: waiting for the PUBACK of event %s: %w", m.Event.ID, errors.New("connection lost")))
			}
		case <-wctx.Done():
			errs[s.i] = txbox.Unavailable(fmt.Errorf("mqtt: waiting for the PUBACK of event %s: %w", m.Event.ID, wctx.Err()))
		}
	}
	return errs
}

// encode builds the PUBLISH for m, or says why it can never be sent.
func (p *Publisher) encode(m broker.Message) (*packets.Publish, error) {
	perm := func(format string, a ...any) error {
		return txbox.Permanent(fmt.Errorf("mqtt: event %s: "+format, append([]any{m.Event.ID}, a...)...))
	}
	if err := ValidateTopic(m.Topic); err != nil {
		return nil, perm("%v", err)
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return nil, err
	}
	props := &packets.Properties{ContentType: broker.ContentJSON}
	for _, a := range attrs {
		if a[0] == broker.AttrDataContentType {
			continue // the binding maps it to Content Type
		}
		if err := checkString(a[1]); err != nil {
			return nil, txbox.Permanent(fmt.Errorf("%w: mqtt: event %s: attribute %s: %v", txbox.ErrInvalidEvent, m.Event.ID, a[0], err))
		}
		props.User = append(props.User, packets.User{Key: a[0], Value: a[1]})
	}
	if limit := p.opts.MaxPayload; limit > 0 && len(m.Event.Payload) > limit {
		return nil, perm("payload of %d bytes for %q is over the configured limit of %d", len(m.Event.Payload), m.Topic, limit)
	}
	pb := &packets.Publish{QoS: 1, Topic: m.Topic, Properties: props, Payload: m.Event.Payload}
	if limit := p.maxPacket.Load(); limit > 0 {
		if size := packetSize(pb); size > int(limit) {
			return nil, perm("PUBLISH for %q is %d bytes (payload %d), over the server's Maximum Packet Size of %d", m.Topic, size, len(m.Event.Payload), limit)
		}
	}
	return pb, nil
}

// packetSize is the encoded size of pb.
func packetSize(pb *packets.Publish) int {
	n := 0
	for _, b := range pb.Buffers() {
		n += len(b)
	}
	vbi := 1 // the remaining length's variable byte integer
	for r := n; r >= 128; r /= 128 {
		vbi++
	}
	return 1 + vbi + n
}

// result maps a PUBACK (or its absence) to txbox's classes.
func (p *Publisher) result(m broker.Message, r packets.ControlPacket) error {
	if r.Type == 0 {
		// The session state gave up on the packet: the connection closed.
		return txbox.Unavailable(fmt.Errorf("mqtt: waiting for the PUBACK of event %s: %w", m.Event.ID, errors.New("connection closed")))
	}
	pa, ok := r.Content.(*packets.Puback)
	if !ok {
		return txbox.Unavailable(fmt.Errorf("mqtt: publish event %s: %w", m.Event.ID, fmt.Errorf("unexpected %s instead of PUBACK", r.PacketType())))
	}
	rc := pa.ReasonCode
	if rc == packets.PubackNoMatchingSubscribers {
		p.noSubs.Add(1)
		if p.opts.RequireSubscribers {
			// No subscription is the destination missing: one made later
			// takes the same event.
			return txbox.Unavailable(fmt.Errorf("mqtt: event %s on %q: broker matched no subscription (PUBACK 0x10) and dropped it", m.Event.ID, m.Topic))
		}
		return nil
	}
	if rc < 0x80 {
		return nil
	}
	text := fmt.Sprintf("mqtt: broker refused event %s on %q: PUBACK reason 0x%02x %s", m.Event.ID, m.Topic, rc, reasonName[rc])
	if pa.Properties != nil && pa.Properties.ReasonString != "" {
		text += ": " + pa.Properties.ReasonString
	}
	switch rc {
	case packets.PubackTopicNameInvalid, 0x95, packets.PubackPayloadFormatInvalid:
		// The topic or the bytes themselves: retrying cannot succeed; an
		// operator fixes the template or the payload and replays.
		return txbox.Permanent(errors.New(text))
	case packets.PubackNotAuthorized, packets.PubackQuotaExceeded, packets.PubackPacketIdentifierInUse,
		0x88, 0x89, 0x8B, 0x93, 0x96, 0x9F:
		// The ACL, a full queue or a rate limit, the session's packet ids,
		// and codes other brokers send for their own state (server
		// unavailable, busy, shutting down, receive maximum exceeded,
		// message rate too high, connection rate exceeded): the same
		// event goes through once the broker's state changes.
		return txbox.Unavailable(errors.New(text))
	}
	// 0x80 unspecified, 0x83 implementation specific (Mosquitto's
	// message_size_limit, but also other refusals): either could be the
	// event's fault, so the relay's retries and attempt limit decide.
	return errors.New(text)
}

// Close disconnects. Publishes in flight fail with ErrBrokerUnavailable.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	c := p.cur
	p.cur = nil
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
	return nil
}
