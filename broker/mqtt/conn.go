// Package mqttbroker publishes and consumes txbox events over MQTT 5, in
// CloudEvents 1.0 binary content mode, with github.com/eclipse/paho.golang.
//
// Its directory is broker/mqtt, but the package is named mqttbroker so that
// it does not shadow the MQTT client packages in code importing both:
//
//	import mqttbroker "github.com/txbox/txbox/broker/mqtt"
//
// # Wire format
//
// Each event is one QoS 1 PUBLISH on the topic rendered from the relay's
// template. Following the CloudEvents MQTT binding for MQTT 5 binary mode,
// datacontenttype ("application/json") travels in the PUBLISH Content Type
// property, every other attribute as a User Property named by the attribute,
// unprefixed ("specversion", "id", "type", "source", "subject", "time",
// "aggregatetype", "aggregateversion" (when above 0), "traceparent", ...), and the payload is
// the event's JSON, byte for byte. A Subscriber also decodes structured mode
// (Content Type "application/cloudevents+json"), the only mode MQTT 3.1.1
// producers can send.
//
// MQTT topics use '/' between levels, and the relay's default template
// ("outbox.{aggregate_type}.{event_type}") is a single level, which consumers
// can only subscribe to by its full name; with MQTT prefer a template such as
// "outbox/{aggregate_type}/{event_type}", which "outbox/#" or
// "outbox/Order/+" match.
//
// # What a confirmation means
//
// A publish counts when its PUBACK arrives with a success reason code. An
// MQTT broker is not a log: it hands a message to the subscriptions that
// exist when it arrives and keeps it only for those (for offline persistent
// sessions, up to the broker's queue limits — Mosquitto's
// max_queued_messages, 1000 by default, drops beyond that). A message no
// subscription matched is acknowledged and gone (MQTT 5 says so with reason
// 0x10, which Options.RequireSubscribers turns into an outage, as a missing
// destination: the relay waits, spending no attempt, for a subscription).
// Start consumers, whose persistent sessions then queue for them, before
// producers. Whether a confirmed message survives a broker restart depends
// on the broker (Mosquitto: "persistence true" saves on shutdown and every
// autosave_interval, so a crash loses what changed since the last save);
// Options.AssumePersistent is the operator's declaration of it.
package mqttbroker

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/internal/redact"
)

// Connection is how Open and OpenSubscriber reach the broker, embedded in
// Options and SubscriberOptions: one value serves both sides. The client
// id is not part of it: each side has its own (see Options.ClientID and
// SubscriberOptions.ClientID).
type Connection struct {
	// TLSConfig for mqtts:// URLs. Default: system roots, TLS 1.2+.
	TLSConfig *tls.Config
	// ConnectTimeout bounds dialling and the CONNECT handshake, and the
	// subscriber's SUBSCRIBE. Default 5s.
	ConnectTimeout time.Duration
	// KeepAlive is the MQTT keep-alive; a connection silent for 1.5 times
	// as long is dropped. Default 30s.
	KeepAlive time.Duration
	// Logger gets connection events. Default slog.Default().
	Logger *slog.Logger
	// ClientOptions, when set, edits paho's client configuration and the
	// CONNECT packet txbox made, before each connection: credentials other
	// than the URL's, enhanced authentication (AuthMethod and an
	// AuthHandler), a will message, user properties, the packet timeout.
	// The connection, session, client id, Clean Start, session expiry and
	// the handlers of received messages and lost connections are txbox's
	// again afterwards.
	ClientOptions func(*paho.ClientConfig, *paho.Connect)
}

// withDefaults fills the fields left zero.
func (c *Connection) withDefaults() {
	c.ConnectTimeout = defaults.Positive(c.ConnectTimeout, defaultConnectTimeout)
	c.KeepAlive = defaults.Positive(c.KeepAlive, DefaultKeepAlive)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Defaults for Options and SubscriberOptions.
const (
	defaultConnectTimeout = defaults.ConnectTimeout
	defaultAckTimeout     = 30 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	defaultSessionExpiry  = 7 * 24 * time.Hour
	defaultMaxAckPending  = 1000
	defaultAckWait        = 30 * time.Second
)

// endpoint is a parsed broker URL.
type endpoint struct {
	addr     string // host:port
	host     string
	tls      bool
	username string
	password []byte
	hasUser  bool
	hasPass  bool
	redacted string
}

// parseURL reads mqtt://, tcp:// (plain) and mqtts://, ssl://, tls:// (TLS)
// URLs with optional user:password. Errors name the URL without its
// password.
func parseURL(raw string) (endpoint, error) {
	bad := func(format string, a ...any) (endpoint, error) {
		return endpoint{}, &txbox.ConfigError{Field: "MQTT URL", Reason: fmt.Sprintf(format, a...)}
	}
	if strings.TrimSpace(raw) == "" {
		return bad("empty; e.g. mqtt://127.0.0.1:1883")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("%s does not parse", redact.URL(raw))
	}
	ep := endpoint{host: u.Hostname(), redacted: redact.URL(raw)}
	port := u.Port()
	switch strings.ToLower(u.Scheme) {
	case "mqtt", "tcp":
		if port == "" {
			port = "1883"
		}
	case "mqtts", "ssl", "tls":
		ep.tls = true
		if port == "" {
			port = "8883"
		}
	default:
		return bad("%s: scheme %q, want mqtt, mqtts, tcp, ssl or tls", ep.redacted, u.Scheme)
	}
	if ep.host == "" {
		return bad("%s has no host", ep.redacted)
	}
	if u.Path != "" && u.Path != "/" {
		return bad("%s: a broker URL has no path (topics come from the topic template)", ep.redacted)
	}
	ep.addr = net.JoinHostPort(ep.host, port)
	if u.User != nil {
		ep.hasUser = true
		ep.username = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			ep.hasPass = true
			ep.password = []byte(pw)
		}
	}
	return ep, nil
}

// conn is one MQTT network connection and its client. A Publisher or
// Subscriber makes a new one after the old one is lost; paho's client
// cannot be reconnected.
type conn struct {
	cli   *paho.Client
	net   net.Conn     // thread-safe: paho and the publisher both write
	state *state.State // session state, shared with cli
	ack   *paho.Connack
	gen   uint64
}

// dead reports whether the connection has shut down.
func (c *conn) dead() bool {
	select {
	case <-c.cli.Done():
		return true
	default:
		return false
	}
}

// close disconnects politely (reason 0: the session, if any, is kept) and
// waits for the client to shut down.
func (c *conn) close() {
	if !c.dead() {
		_ = c.cli.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	<-c.cli.Done()
	_ = c.state.Close()
}

// serverMaxPacket is the Maximum Packet Size the server announced, 0 if none.
func (c *conn) serverMaxPacket() uint32 {
	if c.ack != nil && c.ack.Properties != nil && c.ack.Properties.MaximumPacketSize != nil {
		return *c.ack.Properties.MaximumPacketSize
	}
	return 0
}

// dialConfig is what both sides need to connect.
type dialConfig struct {
	ep             endpoint
	tls            *tls.Config
	clientID       string
	cleanStart     bool
	sessionExpiry  uint32 // seconds
	receiveMaximum uint16
	keepAlive      time.Duration
	connectTimeout time.Duration
	manualAck      bool
	onPublish      func(paho.PublishReceived) (bool, error)
	onLost         func(error)
	edit           func(*paho.ClientConfig, *paho.Connect) // the caller's ClientOptions
	gen            uint64
	state          *state.State // the session state to use; nil: a new one
	log            *slog.Logger // gets paho's own error log; nil: discarded
}

// dial opens a TCP (or TLS) connection and completes the MQTT 5 CONNECT
// handshake within connectTimeout or ctx, whichever ends first. A refused
// CONNECT that configuration must fix (bad credentials, client id, protocol)
// is a *txbox.ConfigError; anything else wraps txbox.ErrBrokerUnavailable.
func dial(ctx context.Context, c dialConfig) (*conn, error) {
	what := "connect to " + c.ep.redacted
	timeout, err := deadline.Budget(ctx, c.connectTimeout)
	if err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: %s: %w", what, err))
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var raw net.Conn
	if c.ep.tls {
		cfg := c.tls
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = c.ep.host
		}
		d := tls.Dialer{Config: cfg}
		raw, err = d.DialContext(dctx, "tcp", c.ep.addr)
	} else {
		var d net.Dialer
		raw, err = d.DialContext(dctx, "tcp", c.ep.addr)
	}
	if err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: %s: %w", what, err))
	}
	nc := packets.NewThreadSafeConn(raw)
	st := c.state
	if st == nil {
		st = state.NewInMemory()
	}
	cc := paho.ClientConfig{PacketTimeout: timeout, SendAcksInterval: 10 * time.Millisecond}
	cp := &paho.Connect{
		KeepAlive: uint16(c.keepAlive / time.Second),
		Properties: &paho.ConnectProperties{
			ReceiveMaximum:     &c.receiveMaximum,
			RequestProblemInfo: true,
		},
	}
	if c.ep.hasUser {
		cp.UsernameFlag, cp.Username = true, c.ep.username
	}
	if c.ep.hasPass {
		cp.PasswordFlag, cp.Password = true, c.ep.password
	}
	if c.edit != nil {
		c.edit(&cc, cp)
	}
	// What the adapter rests on, whatever the caller's ClientOptions set:
	// its connection, session and client id, and its own handlers.
	cc.ClientID, cc.Conn, cc.Session = c.clientID, nc, st
	cc.EnableManualAcknowledgment = c.manualAck
	cc.OnClientError = c.onLost
	cc.OnServerDisconnect = func(d *paho.Disconnect) {
		reason := fmt.Sprintf("server sent DISCONNECT 0x%02x", d.ReasonCode)
		if d.Properties != nil && d.Properties.ReasonString != "" {
			reason += ": " + d.Properties.ReasonString
		}
		c.onLost(errors.New(reason))
	}
	if c.onPublish != nil {
		cc.OnPublishReceived = []func(paho.PublishReceived) (bool, error){c.onPublish}
	} else {
		cc.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) { return true, nil }}
	}
	cp.ClientID, cp.CleanStart = c.clientID, c.cleanStart
	if cp.Properties == nil {
		cp.Properties = &paho.ConnectProperties{}
	}
	cp.Properties.SessionExpiryInterval = &c.sessionExpiry
	cli := paho.NewClient(cc)
	if c.log != nil {
		cli.SetErrorLogger(pahoLog{c.log})
	}
	ca, err := cli.Connect(dctx, cp)
	if err != nil {
		_ = raw.Close()
		_ = st.Close()
		if ca != nil && ca.ReasonCode >= 0x80 {
			return nil, connackErr(c.ep.redacted, c.clientID, ca)
		}
		return nil, txbox.Unavailable(fmt.Errorf("mqtt: %s: %w", what, err))
	}
	if ca.Properties != nil && ca.Properties.MaximumQoS != nil && *ca.Properties.MaximumQoS < 1 {
		_ = cli.Disconnect(&paho.Disconnect{ReasonCode: 0})
		return nil, &txbox.ConfigError{Field: "MQTT URL", Reason: fmt.Sprintf("%s supports only QoS 0; txbox needs QoS 1", c.ep.redacted)}
	}
	return &conn{cli: cli, net: nc, state: st, ack: ca, gen: c.gen}, nil
}

// connackErr classifies a refused CONNECT.
func connackErr(server, clientID string, ca *paho.Connack) error {
	reason := fmt.Sprintf("CONNACK reason 0x%02x %s", ca.ReasonCode, reasonName[ca.ReasonCode])
	if ca.Properties != nil && ca.Properties.ReasonString != "" {
		reason += ": " + ca.Properties.ReasonString
	}
	switch ca.ReasonCode {
	case 0x84, 0x85, 0x86, 0x87, 0x8C, 0x9A:
		// Unsupported protocol, client id refused, bad credentials, not
		// authorized, bad auth method: retrying the same settings fails.
		return &txbox.ConfigError{Field: "MQTT URL", Reason: fmt.Sprintf("%s refused client %q: %s", server, clientID, reason)}
	}
	return txbox.Unavailable(fmt.Errorf("mqtt: connect to %s: %w", server, errors.New(reason)))
}

// randomID returns prefix followed by 12 random hex digits.
func randomID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// lock is a mutex whose Lock gives up when ctx ends, so that a caller
// waiting for another's reconnection keeps its deadline.
type lock chan struct{}

func newLock() lock { return make(lock, 1) }

func (l lock) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l lock) unlock() { <-l }

// pahoLog routes paho's error log through slog at debug level (the
// adapter reports a lost connection itself), so that it follows the
// application's format (with --log-format json, a JSON line).
type pahoLog struct{ l *slog.Logger }

func (p pahoLog) Println(v ...any) {
	p.l.Debug("mqtt client: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

func (p pahoLog) Printf(format string, v ...any) {
	p.l.Debug("mqtt client: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}
