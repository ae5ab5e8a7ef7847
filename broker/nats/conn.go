// Package natsbroker publishes and consumes txbox events through NATS
// JetStream, in CloudEvents 1.0 binary content mode.
//
// Its directory is broker/nats, but the package is named natsbroker so that
// it does not shadow github.com/nats-io/nats.go in code importing both:
//
//	import natsbroker "github.com/txbox/txbox/broker/nats"
//
// On the wire each event is one JetStream message on the subject rendered
// from the relay's template. Every CloudEvents attribute travels as a header
// named "ce-" + attribute ("ce-id", "ce-type", "ce-source", "ce-subject",
// "ce-time", "ce-datacontenttype", "ce-aggregatetype", "ce-aggregateversion" (when above 0),
// "ce-traceparent", ...), the body is the JSON payload, "content-type" is
// "application/json", and "Nats-Msg-Id" is the event id, so JetStream drops a
// republished event inside the stream's duplicate window. This is what the
// CloudEvents Go SDK's JetStream binding (protocol/nats_jetstream/v2) reads
// as a binary-mode event.
package natsbroker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/internal/redact"
)

// Defaults for Options and SubscriberOptions.
const (
	DefaultStream         = "TXBOX"
	defaultSubjects       = "outbox.>"
	defaultMaxInFlight    = 4096
	defaultAckTimeout     = 30 * time.Second
	defaultConnectTimeout = defaults.ConnectTimeout
	defaultReconnectWait  = time.Second
	defaultAckWait        = 30 * time.Second
)

// Connection is how Open and OpenSubscriber reach the server, embedded in
// Options and SubscriberOptions: one value serves both sides.
type Connection struct {
	// ConnectTimeout bounds dialling. Default 5s.
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnection attempts, which go on
	// forever. Default 1s.
	ReconnectWait time.Duration
	// Name is the client name the server shows. Default "txbox-publisher"
	// (Open) or "txbox-subscriber" (OpenSubscriber).
	Name string
	// Logger gets connection events. Default slog.Default().
	Logger *slog.Logger
	// Conn, when set, is used instead of dialling url, and Close leaves it
	// open. Its reconnect buffer should be disabled (nats.ReconnectBufSize(-1))
	// or publishes during an outage wait in it until their context ends.
	Conn *nats.Conn
	// ClientOptions are nats.go's own, added after txbox's when dialling:
	// credentials, TLS, ping interval, and so on. Unused with Conn.
	ClientOptions []nats.Option
}

// withDefaults fills the fields left zero; name is the side's client name.
func (c *Connection) withDefaults(name string) {
	c.ReconnectWait = defaults.Positive(c.ReconnectWait, defaultReconnectWait)
	c.Name, c.Logger, c.ConnectTimeout = defaults.Client(c.Name, name, c.Logger, c.ConnectTimeout)
}

// session is what both sides work through: a connection and JetStream on
// it.
type session struct {
	nc  *nats.Conn
	own bool // dialled by the adapter, so closed by it; else the caller's
	js  jetstream.JetStream
}

// openSession takes the caller's connection (c.Conn) or else dials url, and
// opens JetStream on it with opts.
func openSession(ctx context.Context, url string, c Connection, opts ...jetstream.JetStreamOpt) (session, error) {
	s := session{nc: c.Conn}
	if c.Conn == nil {
		nc, err := connect(ctx, url, c)
		if err != nil {
			return session{}, err
		}
		s.nc, s.own = nc, true
	}
	js, err := jetstream.New(s.nc, opts...)
	if err != nil {
		s.close()
		return session{}, fmt.Errorf("nats: jetstream: %w", err)
	}
	s.js = js
	return s, nil
}

// close closes the connection if the adapter dialled it.
func (s session) close() {
	if s.own {
		s.nc.Close()
	}
}

// connect dials NATS so that the client reconnects forever by itself and
// never buffers while disconnected: a publish during an outage fails at once
// instead of waiting in a buffer the relay cannot see.
func connect(ctx context.Context, url string, c Connection) (*nats.Conn, error) {
	if err := checkURL(url); err != nil {
		return nil, err
	}
	timeout, err := deadline.Budget(ctx, c.ConnectTimeout)
	if err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("nats: connect to %s: %w", redact.URL(url), err))
	}
	log := c.Logger
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(c.ReconnectWait),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil {
				// Our own Close: a clean stop is not worth a warning.
				log.Debug("nats: connection closed", "server", nc.ConnectedUrlRedacted())
				return
			}
			log.Warn("nats: disconnected", "server", nc.ConnectedUrlRedacted(), "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats: async error", "subject", subject, "err", err)
		}),
	}
	nc, err := nats.Connect(url, append(opts, c.ClientOptions...)...)
	if err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("nats: connect to %s: %w", redact.URL(url), redact.Error(err, url)))
	}
	return nc, nil
}

// checkURL rejects a server list that does not parse, naming it without its
// password.
func checkURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return &txbox.ConfigError{Field: "NATS URL", Reason: "empty"}
	}
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		if _, err := url.Parse(s); err != nil {
			return &txbox.ConfigError{Field: "NATS URL", Reason: fmt.Sprintf("%s does not parse", redact.URL(s))}
		}
	}
	return nil
}
