// Package rabbitmqbroker publishes and consumes txbox events through
// RabbitMQ (AMQP 0-9-1), in CloudEvents 1.0 binary content mode.
//
// Its directory is broker/rabbitmq, but the package is named rabbitmqbroker
// so that it does not shadow the client library in code importing both:
//
//	import rabbitmqbroker "github.com/txbox/txbox/broker/rabbitmq"
//
// # On the wire
//
// Each event is one message published to an exchange (default: the durable
// topic exchange "txbox") with routing key = the destination rendered from
// the relay's template. The body is the JSON payload, unchanged. Properties:
// content_type "application/json" (the CloudEvents datacontenttype, as the
// AMQP binding maps it), message_id = event id, delivery_mode 2
// (persistent), timestamp = occurred-at (seconds). Every other CloudEvents
// attribute is a header (an application property) named "cloudEvents_" +
// attribute: "cloudEvents_specversion", "cloudEvents_id", "cloudEvents_type",
// "cloudEvents_source", "cloudEvents_subject", "cloudEvents_time",
// "cloudEvents_aggregatetype", "cloudEvents_aggregateversion" (when above 0),
// "cloudEvents_traceparent", ... all as AMQP strings (the canonical string
// form the binding allows).
//
// The binding (CloudEvents AMQP protocol binding, section 3.1.3.1) permits
// "cloudEvents_" and "cloudEvents:" and says the '_' separator SHOULD be
// preferred, because ':' is not allowed in JMS 2.0 property identifiers and
// message selectors; '_' is also what header-exchange bindings and policy
// tools handle without quoting. So txbox writes "cloudEvents_", and reads
// both, as the binding asks consumers to.
//
// # Confirms and returns
//
// The publisher puts its channels in confirm mode and publishes with the
// mandatory flag. A message counts as published only when the broker acks
// it. A message no queue is bound for comes back as basic.return before its
// ack, and a message a queue cannot take (a length limit with overflow
// reject-publish) is nacked; both are txbox.ErrBrokerUnavailable ("no queue
// is bound to routing key ...", "the broker nacked it ..."), as is a lost
// connection, after which the next Publish dials again: a queue deleted or
// full is the way out's failure, not the event's, and spends none of its
// attempts. The adapter never retries and never sleeps.
//
// # Redelivery
//
// RabbitMQ has no delayed redelivery. Nak(delay) therefore parks a copy of
// the message in a retry queue "<queue>.retry.<ms>ms" whose x-message-ttl is
// the delay (rounded up to one of a few steps per decade) and whose
// dead-letter exchange is the default exchange with the consumer's own
// queue as routing key: when the TTL expires, the broker moves the copy back
// to the tail of that queue, and only that queue. The copy is confirmed
// before the original is acked, so a failure in between gives a duplicate
// (which the inbox absorbs), never a loss. Every message in one retry queue
// has the same TTL, so no message waits behind a longer one. Retry queues
// expire (x-expires) once unused for long after their last message left.
//
// RabbitMQ has no ack wait either: an unacked delivery comes back when its
// channel closes. SubscriberOptions.AckWait adds one on the client: a
// delivery neither acked nor Nak'd within it is rejected with requeue, as a
// lease.
//
// Attempt is 1 + the retries recorded in the "txbox-attempt" header of a
// retry copy + the broker's count of returns: "x-delivery-count" on quorum
// queues, or 1 if the delivery is flagged redelivered on classic queues,
// which keep no count (so there it is a lower bound).
package rabbitmqbroker

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/internal/redact"
)

// Defaults for Options and SubscriberOptions.
const (
	DefaultExchange     = "txbox"
	DefaultExchangeType = "topic"
	// DefaultMaxPayload is RabbitMQ 4's default max_message_size (16 MiB;
	// 3.x allowed 128 MiB). Set Options.MaxPayload to the server's value.
	DefaultMaxPayload     = 16 << 20
	defaultMaxChannels    = 8
	defaultConnectTimeout = defaults.ConnectTimeout
	DefaultKeepAlive      = 10 * time.Second
	defaultMaxAckPending  = 128
)

// link is one AMQP connection and the socket under it. Closing the socket
// is the only way to abort a write the broker does not read (TCP
// back-pressure, or a connection it blocked on a resource alarm).
type link struct {
	conn    *amqp.Connection
	raw     net.Conn
	blocked atomic.Pointer[string] // reason, while the broker blocks publishing
}

func (l *link) abort() {
	if l.raw != nil {
		_ = l.raw.Close()
	}
}

func (l *link) closed() bool { return l.conn.IsClosed() }

// Connection is how Open and OpenSubscriber reach the broker, embedded in
// Options and SubscriberOptions: one value serves both sides.
type Connection struct {
	// ConnectTimeout bounds dialling and the AMQP handshake. Default 5s.
	ConnectTimeout time.Duration
	// KeepAlive is the AMQP heartbeat interval, which detects a dead peer.
	// Default 10s.
	KeepAlive time.Duration
	// Name is the connection name the management UI shows. Default
	// "txbox-publisher" (Open) or "txbox-subscriber" (OpenSubscriber).
	Name string
	// TLSConfig configures amqps:// connections. Default: from the URL.
	TLSConfig *tls.Config
	// Logger gets connection events. Default slog.Default().
	Logger *slog.Logger
	// ClientOptions, when set, edits the amqp091-go configuration txbox
	// made (heartbeat, TLS, connection name) before each dial: SASL
	// mechanisms, vhost, channel and frame limits, more client properties.
	// Its Dial is txbox's again afterwards: it bounds the handshake by the
	// caller's context and lets a stuck write be aborted.
	ClientOptions func(*amqp.Config)
}

// withDefaults fills the fields left zero; name is the side's connection
// name.
func (c *Connection) withDefaults(name string) {
	c.KeepAlive = cmp.Or(c.KeepAlive, DefaultKeepAlive)
	c.Name, c.Logger, c.ConnectTimeout = defaults.Client(c.Name, name, c.Logger, c.ConnectTimeout)
}

// dialConfig is what dial needs of the connection.
func (c *Connection) dialConfig(url string) dialConfig {
	return dialConfig{url: url, name: c.Name, timeout: c.ConnectTimeout, keepAlive: c.KeepAlive, tls: c.TLSConfig, edit: c.ClientOptions, logger: c.Logger}
}

// blockedReason is why the broker stopped reading publishes, or "".
func (l *link) blockedReason() string {
	if r := l.blocked.Load(); r != nil {
		return *r
	}
	return ""
}

type dialConfig struct {
	url       string
	name      string
	timeout   time.Duration
	keepAlive time.Duration
	tls       *tls.Config
	edit      func(*amqp.Config) // the caller's ClientOptions
	logger    *slog.Logger
}

// dial connects once, within ctx and the connect timeout.
func dial(ctx context.Context, c dialConfig) (*link, error) {
	if err := checkURL(c.url); err != nil {
		return nil, err
	}
	timeout, err := deadline.Budget(ctx, c.timeout)
	if err != nil {
		return nil, txbox.Unavailable(fmt.Errorf("rabbitmq: connect to %s: %w", redact.URL(c.url), err))
	}
	var mu sync.Mutex
	var raw net.Conn
	cfg := amqp.Config{
		Heartbeat:       c.keepAlive,
		TLSClientConfig: c.tls,
		Properties:      amqp.Table{"connection_name": c.name, "product": "txbox"},
	}
	if c.edit != nil {
		c.edit(&cfg)
	}
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// Bounds the TLS and AMQP handshakes; the library clears it once
		// the connection is open.
		_ = conn.SetDeadline(time.Now().Add(timeout))
		mu.Lock()
		raw = conn
		mu.Unlock()
		return conn, nil
	}
	// A canceled ctx ends the handshake at once.
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			_ = raw.SetDeadline(time.Now())
		}
	})
	conn, err := amqp.DialConfig(c.url, cfg)
	stop()
	if err != nil {
		return nil, connectErr(c.url, err)
	}
	l := &link{conn: conn, raw: raw}
	log := c.logger
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	go func() {
		for b := range blocks {
			if b.Active {
				reason := b.Reason
				l.blocked.Store(&reason)
				log.Warn("rabbitmq: broker blocked the connection", "reason", b.Reason)
			} else {
				l.blocked.Store(nil)
				log.Info("rabbitmq: broker unblocked the connection")
			}
		}
	}()
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		if err, ok := <-closes; ok && err != nil {
			log.Warn("rabbitmq: connection lost", "server", redact.URL(c.url), "err", err)
		}
	}()
	return l, nil
}

// connectErr tells refused credentials or vhost (configuration) from an
// unreachable server.
func connectErr(rawURL string, err error) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Server && (aerr.Code == amqp.AccessRefused || aerr.Code == amqp.NotAllowed) {
		return &txbox.ConfigError{Field: "AMQP URL", Reason: fmt.Sprintf("%s: %v", redact.URL(rawURL), redact.Error(err, rawURL))}
	}
	// RabbitMQ answers bad credentials by closing the socket right after
	// the client's credentials (the client does not ask for a
	// connection.close), which the client reports as ErrCredentials.
	if errors.Is(err, amqp.ErrCredentials) {
		return &txbox.ConfigError{Field: "AMQP URL", Reason: fmt.Sprintf("%s: the broker closed the connection on the credentials: username or password not allowed", redact.URL(rawURL))}
	}
	return txbox.Unavailable(fmt.Errorf("rabbitmq: connect to %s: %w", redact.URL(rawURL), redact.Error(err, rawURL)))
}

// checkURL rejects a URL the client cannot use, naming it without its
// password.
func checkURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return &txbox.ConfigError{Field: "AMQP URL", Reason: "empty"}
	}
	if _, err := amqp.ParseURI(raw); err != nil {
		return &txbox.ConfigError{Field: "AMQP URL", Reason: fmt.Sprintf("%s: %v", redact.URL(raw), redact.Error(err, raw))}
	}
	return nil
}

// rpc runs a synchronous AMQP method (which the client cannot cancel)
// within ctx: if ctx ends first, the connection is aborted so that nothing
// stays blocked, and the error is txbox.ErrBrokerUnavailable.
func rpc(ctx context.Context, l *link, what string, f func() error) error {
	if err := deadline.Ended(ctx); err != nil {
		return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: %w", what, err))
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		l.abort()
		<-done
		return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: %w", what, ctx.Err()))
	}
}

// declareErr tells a refused declaration (configuration) from a lost
// connection.
func declareErr(field, what string, err error) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code != amqp.ChannelError && aerr.Code != amqp.ConnectionForced && aerr.Server {
		return &txbox.ConfigError{Field: field, Reason: fmt.Sprintf("%s: %v", what, err)}
	}
	if errors.Is(err, txbox.ErrBrokerUnavailable) {
		return err
	}
	return txbox.Unavailable(fmt.Errorf("rabbitmq: %s: %w", what, err))
}
