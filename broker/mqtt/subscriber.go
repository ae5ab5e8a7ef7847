package mqttbroker

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/receive"
)

// SubscriberOptions configure a Subscriber.
type SubscriberOptions struct {
	// ClientID names the persistent session on the broker, which queues
	// messages for it while it is away; use the consumer's name. Required.
	// One process at a time: the broker drops the older of two connections
	// with one client id. To share the work of one consumer between
	// processes, give each its own client id and subscribe with a shared
	// subscription filter ("$share/<consumer>/<filter>"), where the broker
	// supports it.
	ClientID string
	// Topics are the topic filters to subscribe to with QoS 1, e.g.
	// "outbox/Order/#". Required.
	Topics []string
	// SessionExpiry is how long the broker keeps the session, and queues
	// for it, after a disconnect. Default 7 days; at most about 136 years,
	// which MQTT means as "never".
	SessionExpiry time.Duration
	// MaxAckPending bounds the deliveries the broker sends before they are
	// acknowledged (MQTT's Receive Maximum). Default 1000; at most 65535.
	MaxAckPending int
	// AckWait: a delivery neither acknowledged nor Nak'd within it is
	// delivered again by the Subscriber. Default 30s; negative disables.
	AckWait time.Duration
	// Connection is how to reach the broker, the same as in Options.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *SubscriberOptions) withDefaults() error {
	if o.ClientID == "" {
		return &txbox.ConfigError{Field: "MQTT client id", Reason: "empty; use the consumer's name"}
	}
	if err := checkString(o.ClientID); err != nil {
		return &txbox.ConfigError{Field: "MQTT client id", Reason: err.Error()}
	}
	if len(o.Topics) == 0 {
		return &txbox.ConfigError{Field: "MQTT topic filters", Reason: "none given"}
	}
	for _, f := range o.Topics {
		if err := ValidateFilter(f); err != nil {
			return &txbox.ConfigError{Field: "MQTT topic filters", Reason: err.Error()}
		}
	}
	if o.MaxAckPending < 0 || o.MaxAckPending > math.MaxUint16 {
		return &txbox.ConfigError{Field: "MQTT MaxAckPending", Reason: fmt.Sprintf("%d is outside 1..%d (0 for the default)", o.MaxAckPending, math.MaxUint16)}
	}
	o.Topics = slices.Clone(o.Topics)
	o.SessionExpiry = defaults.Positive(o.SessionExpiry, defaultSessionExpiry)
	o.MaxAckPending = cmp.Or(o.MaxAckPending, defaultMaxAckPending)
	o.AckWait = cmp.Or(o.AckWait, defaultAckWait) // negative disables it
	o.Connection.withDefaults()
	return nil
}

// Subscriber receives QoS 1 messages through a persistent session (Clean
// Start off, a long Session Expiry, a fixed client id) with manual
// acknowledgement: the PUBACK goes only when the delivery is acknowledged,
// after the inbox committed, and the broker delivers again, with DUP set,
// whatever was not acknowledged when the connection was lost.
//
// MQTT has no negative acknowledgement and redelivers only on a new
// connection, so the Subscriber keeps an unacknowledged message itself: Nak
// and AckWait hand the same message out again after the delay, while the
// PUBACK stays unsent. If the process dies meanwhile, the broker delivers
// it again to the next connection of the session. The cost: MQTT requires
// PUBACKs in the order the messages arrived, so a message waiting for its
// redelivery holds back the PUBACKs of those after it, and the broker sends
// at most MaxAckPending unacknowledged messages; a consumer whose oldest
// message keeps failing slows down once that window is full, until the
// message is parked.
//
// The connection is made by OpenSubscriber and again, lazily, by Receive
// after it was lost; Receive never sleeps. It is safe for concurrent use.
type Subscriber struct {
	ep   endpoint
	opts SubscriberOptions
	log  *slog.Logger

	dialing lock
	mu      sync.Mutex
	cur     *conn
	gen     uint64
	queue   []*delivery
	ready   chan struct{} // signalled when queue grows
	closed  bool
	done    chan struct{} // closed by Close
}

var _ broker.Subscriber = (*Subscriber)(nil)

// OpenSubscriber connects to url, resuming the session opts.ClientID or
// making it, and subscribes to opts.Topics. Errors are as for Open; a
// filter the broker refuses is a *txbox.ConfigError.
func OpenSubscriber(ctx context.Context, url string, opts SubscriberOptions) (*Subscriber, error) {
	ep, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Subscriber{ep: ep, opts: opts, log: opts.Logger, dialing: newLock(), ready: make(chan struct{}, 1), done: make(chan struct{})}
	if _, err := s.conn(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// conn returns the live connection, making one (and subscribing) if there
// is none.
func (s *Subscriber) conn(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	c, closed := s.cur, s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if c != nil && !c.dead() {
		return c, nil
	}
	if err := s.dialing.lock(ctx); err != nil {
		return nil, err
	}
	defer s.dialing.unlock()
	s.mu.Lock()
	c = s.cur
	s.mu.Unlock()
	if c != nil {
		if !c.dead() {
			return c, nil
		}
		c.close()
	}
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
	}
	s.gen++
	gen := s.gen
	// What the lost connection delivered and nobody acknowledged comes
	// back from the broker on the new one; drop the local copies.
	s.queue = slices.DeleteFunc(s.queue, func(d *delivery) bool { return d.m.gen != gen })
	s.mu.Unlock()
	expiry := uint32(min(s.opts.SessionExpiry/time.Second, math.MaxUint32))
	st := state.NewInMemory()
	nc, err := dial(ctx, dialConfig{
		ep: s.ep, tls: s.opts.TLSConfig, clientID: s.opts.ClientID, cleanStart: false, sessionExpiry: expiry,
		receiveMaximum: uint16(s.opts.MaxAckPending), keepAlive: s.opts.KeepAlive, connectTimeout: s.opts.ConnectTimeout,
		manualAck: true, edit: s.opts.ClientOptions, gen: gen, state: st, log: s.log,
		onPublish: func(pr paho.PublishReceived) (bool, error) {
			s.received(gen, st, pr)
			return true, nil
		},
		onLost: func(err error) {
			s.log.Warn("mqtt: subscriber connection lost", "server", s.ep.redacted, "client_id", s.opts.ClientID, "err", err)
			receive.Wake(s.ready)
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.subscribe(ctx, nc); err != nil {
		nc.close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go nc.close()
		return nil, errClosed
	}
	if c != nil {
		s.log.Info("mqtt: subscriber reconnected", "server", s.ep.redacted, "client_id", s.opts.ClientID, "session_present", nc.ack.SessionPresent)
	}
	s.cur = nc
	return nc, nil
}

// subscribe (re)subscribes to every filter with QoS 1. On a resumed session
// the subscriptions exist already; subscribing again replaces them alike,
// and Retain Handling 1 keeps retained messages from being sent again.
func (s *Subscriber) subscribe(ctx context.Context, c *conn) error {
	sub := &paho.Subscribe{}
	for _, f := range s.opts.Topics {
		sub.Subscriptions = append(sub.Subscriptions, paho.SubscribeOptions{Topic: f, QoS: 1, RetainHandling: 1})
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	sa, err := c.cli.Subscribe(sctx, sub)
	if errors.Is(err, paho.ErrInvalidArguments) {
		return &txbox.ConfigError{Field: "MQTT topic filters", Reason: fmt.Sprintf("%s: %v", s.ep.redacted, err)}
	}
	if sa == nil || len(sa.Reasons) != len(s.opts.Topics) {
		if err == nil {
			err = errors.New("malformed SUBACK")
		}
		return txbox.Unavailable(fmt.Errorf("mqtt: subscribe to %s: %w", strings.Join(s.opts.Topics, ", "), err))
	}
	for i, rc := range sa.Reasons {
		if rc >= 0x80 {
			return &txbox.ConfigError{Field: "MQTT topic filters", Reason: fmt.Sprintf("%s refused the subscription of %q to %q: SUBACK reason 0x%02x", s.ep.redacted, s.opts.ClientID, s.opts.Topics[i], rc)}
		}
	}
	return nil
}

var errClosed = txbox.Unavailable(errors.New("mqtt: subscriber is closed"))

// received queues a message from the broker. It runs on paho's delivery
// goroutine, one message at a time, in arrival order.
func (s *Subscriber) received(gen uint64, st *state.State, pr paho.PublishReceived) {
	first := 1
	if pr.Packet.Duplicate() {
		first = 2 // the broker sent it before, to an earlier connection
	}
	m := &message{pb: pr.Packet, cli: pr.Client, st: st, gen: gen, first: first, emitted: 1}
	s.mu.Lock()
	s.queue = append(s.queue, &delivery{s: s, m: m, attempt: first})
	s.mu.Unlock()
	receive.Wake(s.ready)
}

// done reports whether cli has shut down.
func done(cli *paho.Client) bool {
	select {
	case <-cli.Done():
		return true
	default:
		return false
	}
}

// Receive returns up to max queued deliveries, or waits for the first. If
// the connection was lost it makes one new connection attempt; when that
// fails, or the connection is lost while waiting, it returns an error
// wrapping txbox.ErrBrokerUnavailable and the caller decides when to call
// again.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	redialed := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		// Deliveries of a lost connection come back from the broker on the
		// next one; handing them out now would only make duplicates.
		s.queue = slices.DeleteFunc(s.queue, func(d *delivery) bool { return d.m.gen != s.gen || done(d.m.cli) })
		if len(s.queue) > 0 {
			n := min(max, len(s.queue))
			out := make([]broker.Delivery, n)
			for i, d := range s.queue[:n] {
				out[i] = d
				s.arm(d.m, s.opts.AckWait)
			}
			s.queue = slices.Delete(s.queue, 0, n)
			if len(s.queue) > 0 {
				receive.Wake(s.ready)
			}
			s.mu.Unlock()
			return out, nil
		}
		c := s.cur
		s.mu.Unlock()
		if c == nil || c.dead() {
			if redialed {
				return nil, txbox.Unavailable(fmt.Errorf("mqtt: receive: %w", errors.New("connection lost")))
			}
			redialed = true
			if _, err := s.conn(ctx); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, err
			}
			continue
		}
		select {
		case <-s.ready:
		case <-c.cli.Done():
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// arm (re)starts m's redelivery timer; s.mu is held.
func (s *Subscriber) arm(m *message, after time.Duration) {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if after < 0 {
		return
	}
	m.timer = time.AfterFunc(after, func() { s.redeliver(m) })
}

// redeliver queues m again, unless it was acknowledged or its connection
// is gone (then the broker delivers it again).
func (s *Subscriber) redeliver(m *message) {
	s.mu.Lock()
	if m.acked || s.closed || m.gen != s.gen {
		s.mu.Unlock()
		return
	}
	m.timer = nil
	m.emitted++
	s.queue = append(s.queue, &delivery{s: s, m: m, attempt: m.first + m.emitted - 1})
	s.mu.Unlock()
	receive.Wake(s.ready)
}

// Close disconnects, keeping the session: the broker queues for it, and
// delivers again what was not acknowledged, when a Subscriber with the same
// client id connects.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	c := s.cur
	s.cur = nil
	for _, d := range s.queue {
		if d.m.timer != nil {
			d.m.timer.Stop()
		}
	}
	s.queue = nil
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
	return nil
}

// message is one PUBLISH from the broker, until acknowledged.
type message struct {
	pb      *paho.Publish
	cli     *paho.Client
	st      *state.State // cli's session state
	gen     uint64
	first   int // attempt number of its first delivery: 2 if DUP was set
	emitted int // deliveries handed out so far
	acked   bool
	timer   *time.Timer
}

// delivery is one hand-out of a message.
type delivery struct {
	s       *Subscriber
	m       *message
	attempt int
}

// Attempt is 1 for a first delivery, 2 for one the broker marked DUP
// (delivered before to a lost connection; MQTT does not count further),
// plus one for every redelivery by this Subscriber.
func (d *delivery) Attempt() int { return d.attempt }

// Ack lets the PUBACK go. paho sends PUBACKs in arrival order, as MQTT
// requires, within milliseconds unless an earlier message is still
// unacknowledged. If the connection that brought the message is gone, Ack
// fails and the broker delivers the message again, which the inbox absorbs.
func (d *delivery) Ack(context.Context) error {
	s, m := d.s, d.m
	s.mu.Lock()
	if m.acked {
		s.mu.Unlock()
		return nil
	}
	m.acked = true
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	stale := m.gen != s.gen
	s.mu.Unlock()
	if m.pb.QoS == 0 {
		return nil
	}
	if stale {
		return txbox.Unavailable(fmt.Errorf("mqtt: ack: %w", errors.New("the connection that delivered the message is gone; the broker delivers it again")))
	}
	err := m.cli.Ack(m.pb)
	if errors.Is(err, paho.ErrPacketNotFound) && !done(m.cli) {
		// paho (v0.23) resets its record of messages awaiting manual
		// acknowledgement after its reader has started, so it forgets
		// those a resumed session sends right after CONNACK. Send their
		// PUBACK through the session state, as paho would. They are the
		// first of the connection, so this does not overtake earlier
		// PUBACKs unless one of those was Nak'd; brokers match PUBACKs by
		// packet id.
		err = m.st.Ack(m.pb.Packet())
	}
	if err != nil {
		return txbox.Unavailable(fmt.Errorf("mqtt: ack: %w", err))
	}
	return nil
}

// Nak hands the message out again after delay, without acknowledging it.
// A Nak of a delivery that was already handed out again is ignored.
func (d *delivery) Nak(_ context.Context, delay time.Duration) error {
	s, m := d.s, d.m
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.acked:
		return errors.New("mqtt: nak: message already acknowledged")
	case m.gen != s.gen:
		return txbox.Unavailable(fmt.Errorf("mqtt: nak: %w", errors.New("the connection that delivered the message is gone; the broker delivers it again")))
	case d.attempt != m.first+m.emitted-1:
		return nil
	}
	s.arm(m, max(delay, 0))
	return nil
}

// Event decodes binary mode (User Properties named by the attributes,
// datacontenttype in Content Type) or, when Content Type is
// application/cloudevents+json, structured mode.
func (d *delivery) Event() (txbox.Event, error) {
	pb := d.m.pb
	var props *paho.PublishProperties
	if pb.Properties != nil {
		props = pb.Properties
	} else {
		props = &paho.PublishProperties{}
	}
	if strings.HasPrefix(props.ContentType, "application/cloudevents") {
		return structured(props.ContentType, pb.Payload)
	}
	attrs := ce.Attrs{}
	for _, u := range props.User {
		if err := attrs.Add(u.Key, u.Value); err != nil {
			return txbox.Event{}, err
		}
	}
	return attrs.Event(props.ContentType, pb.Payload)
}

// structured decodes the JSON event format: attributes as members, data as
// JSON (or data_base64).
func structured(contentType string, body []byte) (txbox.Event, error) {
	bad := func(format string, a ...any) (txbox.Event, error) {
		return txbox.Event{}, ce.Malformed(format, a...)
	}
	if !strings.HasPrefix(contentType, "application/cloudevents+json") {
		return bad("structured mode %q, only application/cloudevents+json is understood", contentType)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return bad("structured JSON: %v", err)
	}
	attrs := ce.Attrs{}
	var data []byte
	for k, raw := range members {
		switch k {
		case "data":
			data = raw
			continue
		case "data_base64":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return bad("data_base64: %v", err)
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return bad("data_base64: %v", err)
			}
			data = b
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return bad("attribute %s: %v", k, err)
		}
		switch v := v.(type) {
		case string:
			attrs[k] = v
		case nil:
			continue
		default:
			attrs[k] = strings.TrimSpace(string(raw)) // numbers and booleans in canonical text
		}
	}
	return attrs.Event("", data)
}

// Raw keeps the topic, the User Properties (repeated names joined with
// ", "), Content Type as "content-type", and the payload. ID is the "id"
// property when there is one.
func (d *delivery) Raw() broker.RawMessage {
	pb := d.m.pb
	h := map[string]string{}
	if pb.Properties != nil {
		for _, u := range pb.Properties.User {
			if v, ok := h[u.Key]; ok {
				h[u.Key] = v + ", " + u.Value
			} else {
				h[u.Key] = u.Value
			}
		}
		if pb.Properties.ContentType != "" {
			h["content-type"] = pb.Properties.ContentType
		}
	}
	id := h[broker.AttrID]
	if id == "" {
		id = fmt.Sprintf("%s#%d", d.s.opts.ClientID, pb.PacketID)
	}
	return broker.RawMessage{Topic: pb.Topic, ID: id, Headers: h, Body: append([]byte(nil), pb.Payload...)}
}

// AckWait is how long a delivery may stay unsettled before the adapter hands it
// out again (broker.AckWaiter).
func (s *Subscriber) AckWait() time.Duration { return s.opts.AckWait }

var _ broker.AckWaiter = (*Subscriber)(nil)
