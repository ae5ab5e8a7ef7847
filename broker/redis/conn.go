// Package redisbroker publishes and consumes txbox events through Redis
// Streams.
//
// Its directory is broker/redis, but the package is named redisbroker so
// that it does not shadow github.com/redis/go-redis/v9 in code importing
// both:
//
//	import redisbroker "github.com/txbox/txbox/broker/redis"
//
// # On the wire
//
// Each event is one stream entry, added with XADD (auto id) to the stream
// named by the destination rendered from the relay's template. CloudEvents
// has no Redis binding; txbox carries the event in binary content mode with
// the naming of the Kafka binding, one field per attribute, "ce_" +
// attribute, in this order: "ce_specversion", "ce_id", "ce_type",
// "ce_source", "ce_subject" (aggregate id), "ce_time" (RFC 3339, UTC,
// nanoseconds), "ce_datacontenttype" ("application/json"),
// "ce_aggregatetype", "ce_aggregateversion" (when above 0), then one "ce_"
// field per event header ("ce_traceparent", ...), and last "data": the JSON
// payload, byte for byte.
//
// # Publishing
//
// One Publish is one pipeline of XADDs on one connection, so a call's
// entries are appended in slice order, and each gets its own result. An
// XADD the server answered is durable as far as the server's persistence
// goes (see Publisher.Persistent). An empty stream name and a payload over
// MaxPayload are permanent. A lost connection is txbox.ErrBrokerUnavailable
// (the client dials again on the next call, once: the library's own retries
// are turned off), and so is every refusal for a state of the server or of
// the key, which the same event would meet again: a key that holds another
// type (WRONGTYPE), a key the ACL forbids (NOPERM), out of memory under
// maxmemory (OOM), a read-only replica (READONLY), a server loading its
// data (LOADING), and the like. A refusal not known is a plain, retryable
// error.
// With Options.MaxLen the stream is trimmed (MAXLEN ~): Redis 7 trims
// entries whether or not consumer groups have read them.
//
// # Consuming
//
// A Subscriber is one consumer of a consumer group (created at the first
// entry, "0", unless told otherwise) over one or more streams. Receive
// first claims (XAUTOCLAIM) entries pending longer than AckWait, whoever
// held them: a dead consumer's, and Nak'd ones; then it reads new entries
// with XREADGROUP ... BLOCK. Ack is XACK, after the inbox commit.
//
// Redis has no delayed redelivery. Nak(delay) leaves the entry pending and
// sets its idle time with XCLAIM ... IDLE (AckWait - delay) JUSTID, so that
// the next claim pass finds it after delay. A delay longer than AckWait is
// also kept in a sorted set "<stream>:txbox-delayed:<group>" (score = not
// before, in ms): a claim that finds it early puts it back (idle time and
// delivery count restored) instead of delivering it. So the delay is the
// claim idle time, precise to the polling interval of Receive.
//
// Attempt is Redis's delivery count of the entry (XPENDING): 1 for a new
// entry, incremented by every claim.
package redisbroker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/internal/redact"
)

// Defaults for Options and SubscriberOptions.
const (
	defaultConnectTimeout = defaults.ConnectTimeout
	defaultAckWait        = 30 * time.Second
	// defaultMaxPayload applies when the server does not tell its
	// proto-max-bulk-len (Redis's default, 512 MiB).
	defaultMaxPayload = 512 << 20
	maxPoll           = time.Second
)

// Field names on the wire.
const (
	FieldPrefix = "ce_"
	FieldData   = "data"
)

// Connection is how Open and OpenSubscriber reach the server, embedded in
// Options and SubscriberOptions: one value serves both sides.
type Connection struct {
	// ConnectTimeout bounds one dial. Default 5s.
	ConnectTimeout time.Duration
	// Name is the client name the server shows (CLIENT LIST). Default
	// "txbox-publisher" (Open) or "txbox-subscriber" (OpenSubscriber).
	Name string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// ClientOptions, when set, edits the go-redis options txbox made from
	// the URL: TLS, pool size, read and write timeouts, a credentials
	// provider. MaxRetries stays -1 and ContextTimeoutEnabled true
	// afterwards: the relay does the retrying, and every call keeps its
	// context's deadline.
	ClientOptions func(*redis.Options)
}

// withDefaults fills the fields left zero; name is the side's client name.
func (c *Connection) withDefaults(name string) {
	c.Name, c.Logger, c.ConnectTimeout = defaults.Client(c.Name, name, c.Logger, c.ConnectTimeout)
}

// connect makes the client for url and checks the server within ctx.
func connect(ctx context.Context, url string, c Connection) (*redis.Client, error) {
	routeLibraryLogs(c.Logger)
	rdb, err := newClient(url, c)
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, rdb, url); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return rdb, nil
}

// newClient makes a client for url that never retries by itself, dials
// once per attempt and honours context deadlines.
func newClient(url string, c Connection) (*redis.Client, error) {
	if strings.TrimSpace(url) == "" {
		return nil, &txbox.ConfigError{Field: "Redis URL", Reason: "empty"}
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, &txbox.ConfigError{Field: "Redis URL", Reason: fmt.Sprintf("%s: %v", redact.URL(url), redact.Error(err, url))}
	}
	opt.ClientName = c.Name
	opt.DialerRetries = 1
	opt.DialTimeout = c.ConnectTimeout
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if c.ClientOptions != nil {
		c.ClientOptions(opt)
	}
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// ping checks the server within ctx, telling refused credentials
// (configuration) from an unreachable server.
func ping(ctx context.Context, rdb *redis.Client, rawURL string) error {
	err := rdb.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	if isServerErr(err) {
		msg := err.Error()
		if hasPrefix(msg, "NOAUTH", "WRONGPASS", "NOPERM", "ERR invalid password", "ERR AUTH", "ERR DB index", "ERR invalid DB index", "ERR Client sent AUTH") {
			return &txbox.ConfigError{Field: "Redis URL", Reason: fmt.Sprintf("%s: %v", redact.URL(rawURL), redact.Error(err, rawURL))}
		}
		if !hasPrefix(msg, "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN") {
			return &txbox.ConfigError{Field: "Redis URL", Reason: fmt.Sprintf("%s: %v", redact.URL(rawURL), redact.Error(err, rawURL))}
		}
	}
	return txbox.Unavailable(fmt.Errorf("redis: connect to %s: %w", redact.URL(rawURL), redact.Error(err, rawURL)))
}

// isServerErr reports whether err is the server's reply rather than a
// transport failure.
func isServerErr(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !errors.Is(err, redis.Nil) && !isTransport(err)
}

// isTransport reports a failure to reach or hear the server.
func isTransport(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed)
}

// unavailableReply: server replies that mean "not now" rather than "no".
func unavailableReply(msg string) bool {
	return hasPrefix(msg, "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "MOVED", "ASK")
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
