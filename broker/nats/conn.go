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
// "ce-time", "ce-datacontenttype", "ce-aggregatetype", "ce-aggregateversion",
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

	"github.com/txbox/txbox"
)

// Defaults for Options and SubscriberOptions.
const (
	DefaultStream         = "TXBOX"
	DefaultSubjects       = "outbox.>"
	DefaultMaxInFlight    = 4096
	DefaultAckTimeout     = 30 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultReconnectWait  = time.Second
	DefaultAckWait        = 30 * time.Second
)

// connConfig is what both sides need to dial.
type connConfig struct {
	url            string
	name           string
	connectTimeout time.Duration
	reconnectWait  time.Duration
	logger         *slog.Logger
	extra          []nats.Option
}

// connect dials NATS so that the client reconnects forever by itself and
// never buffers while disconnected: a publish during an outage fails at once
// instead of waiting in a buffer the relay cannot see.
func connect(ctx context.Context, c connConfig) (*nats.Conn, error) {
	if err := checkURL(c.url); err != nil {
		return nil, err
	}
	timeout := c.connectTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: nats: connect to %s: %w", txbox.ErrBrokerUnavailable, RedactURL(c.url), context.DeadlineExceeded)
	}
	log := c.logger
	opts := []nats.Option{
		nats.Name(c.name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(c.reconnectWait),
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
	nc, err := nats.Connect(c.url, append(opts, c.extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: nats: connect to %s: %w", txbox.ErrBrokerUnavailable, RedactURL(c.url), redactErr(err, c.url))
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
			return &txbox.ConfigError{Field: "NATS URL", Reason: fmt.Sprintf("%s does not parse", RedactURL(s))}
		}
	}
	return nil
}

// RedactURL returns a NATS server list (comma-separated URLs) with every
// password replaced by "xxxxx", for logs and errors. A part that does not
// parse is replaced whole, since it may hold a secret in a shape url.Parse
// cannot find.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "@") {
			parts[i] = p // no user info, nothing to hide
			continue
		}
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		switch {
		case err != nil:
			parts[i] = "<unparsable url>"
		case u.User == nil:
			parts[i] = u.String()
		default:
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				u.User = url.User("xxxxx") // a lone user part is a token
			}
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// redactErr returns err with every secret of rawURL blanked from its text;
// errors.Is and errors.As still see the original.
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, secret := range secrets(rawURL) {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// secrets lists the passwords and tokens in a server list.
func secrets(rawURL string) []string {
	var out []string
	for _, p := range strings.Split(rawURL, ",") {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "@") {
			continue
		}
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			if pw != "" {
				out = append(out, pw)
			}
		} else if tok := u.User.Username(); tok != "" {
			out = append(out, tok)
		}
	}
	return out
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// unavailable wraps a connection-level failure so that it matches
// txbox.ErrBrokerUnavailable as well as the cause.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: nats: %s: %w", txbox.ErrBrokerUnavailable, what, err)
}
