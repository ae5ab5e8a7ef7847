package redisbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/internal/redact"
)

// Options configure a Publisher.
type Options struct {
	// MaxLen, when > 0, trims each stream to about that many entries at
	// every XADD (MAXLEN ~). Entries no consumer group has read are trimmed
	// too: size it well above the backlog consumers may fall behind by.
	MaxLen int64
	// MaxPayload is the largest payload published, in bytes; a larger one
	// fails permanently. Default: the server's proto-max-bulk-len, or
	// 512 MiB when the server does not say.
	MaxPayload int
	// AssumePersistent declares that the server keeps what it
	// acknowledged across a restart (append-only file), for servers where
	// Open cannot read the configuration (CONFIG forbidden).
	AssumePersistent bool
	// Connection is how to reach the server, the same as in
	// SubscriberOptions.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *Options) withDefaults() error {
	if o.MaxLen < 0 {
		return &txbox.ConfigError{Field: "Redis MaxLen", Reason: fmt.Sprintf("%d is negative", o.MaxLen)}
	}
	o.Connection.withDefaults("txbox-publisher")
	return nil
}

// Publisher appends events to streams. It is safe for concurrent use.
type Publisher struct {
	rdb        *redis.Client
	opts       Options
	log        *slog.Logger
	maxPayload int
	persistent bool
}

var _ broker.Publisher = (*Publisher)(nil)

// Open connects to url (redis://[user:password@]host:port/db or rediss://
// for TLS; the password is never logged or returned in clear) and reads
// the server's persistence and size settings. An unreachable server is
// reported with txbox.ErrBrokerUnavailable, a bad URL or refused
// credentials with a *txbox.ConfigError.
func Open(ctx context.Context, url string, opts Options) (*Publisher, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	rdb, err := connect(ctx, url, opts.Connection)
	if err != nil {
		return nil, err
	}
	p := &Publisher{rdb: rdb, opts: opts, log: opts.Logger, maxPayload: opts.MaxPayload, persistent: opts.AssumePersistent}
	cfg := serverConfig(ctx, rdb, "appendonly", "proto-max-bulk-len")
	if cfg["appendonly"] == "yes" {
		p.persistent = true
	}
	if p.maxPayload <= 0 {
		p.maxPayload = defaultMaxPayload
		if n, err := strconv.Atoi(cfg["proto-max-bulk-len"]); err == nil && n > 0 {
			// The payload is one bulk string; leave room for the rest.
			p.maxPayload = n
		}
	}
	if !p.persistent {
		p.log.Info("redis: server has no append-only file (or CONFIG is not allowed): acknowledged entries may not survive its restart", "server", redact.URL(url))
	}
	return p, nil
}

// serverConfig reads settings with CONFIG GET; what it cannot read is
// missing.
func serverConfig(ctx context.Context, rdb *redis.Client, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		m, err := rdb.ConfigGet(ctx, n).Result()
		if err != nil {
			continue
		}
		for k, v := range m {
			out[strings.ToLower(k)] = v
		}
	}
	return out
}

// Persistent reports whether a confirmed message survives a server
// restart: the server writes an append-only file (appendonly yes; with
// appendfsync everysec a power loss can still take the last second), or
// Options.AssumePersistent says so.
func (p *Publisher) Persistent() bool { return p.persistent }

// MaxPayload is the largest message the publisher sends (0: no limit of its
// own).
func (p *Publisher) MaxPayload() int { return p.maxPayload }

// Publish appends every message with one pipeline of XADDs, in slice
// order, and reports each one's result.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	if err := deadline.Ended(ctx); err != nil {
		for i := range errs {
			errs[i] = txbox.Unavailable(fmt.Errorf("redis: publish: %w", err))
		}
		return errs
	}
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(msgs))
	for i, m := range msgs {
		fields, err := p.encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: m.Topic, Values: fields, MaxLen: p.opts.MaxLen, Approx: p.opts.MaxLen > 0})
	}
	if pipe.Len() == 0 {
		return errs
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if err := c.Err(); err != nil {
			errs[i] = classify(msgs[i], err)
		}
	}
	return errs
}

// encode lays the message out as stream fields, or says why it can never
// be sent.
func (p *Publisher) encode(m broker.Message) ([]any, error) {
	e := m.Event
	if m.Topic == "" {
		return nil, txbox.Permanent(fmt.Errorf("redis: event %s: empty stream name", e.ID))
	}
	if len(e.Payload) > p.maxPayload {
		return nil, txbox.Permanent(fmt.Errorf("redis: event %s for stream %q: payload of %d bytes is over the limit of %d", e.ID, m.Topic, len(e.Payload), p.maxPayload))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return nil, err
	}
	fields := make([]any, 0, 2*len(attrs)+2)
	for _, a := range attrs {
		fields = append(fields, FieldPrefix+a[0], a[1])
	}
	return append(fields, FieldData, []byte(e.Payload)), nil
}

// classify maps an XADD failure to txbox's classes. The event can make
// XADD fail only by its stream name or payload size, both checked before
// sending (encode); every refusal the server sends back is for a state of
// its own or of the key, which the same event meets again until an
// operator or time changes it: an outage, which spends none of the event's
// attempts. A refusal not known here is retryable.
func classify(m broker.Message, err error) error {
	if isTransport(err) {
		return txbox.Unavailable(fmt.Errorf("redis: XADD event %s to %q: %w", m.Event.ID, m.Topic, err))
	}
	if !isServerErr(err) {
		return fmt.Errorf("redis: event %s: XADD to %q: %w", m.Event.ID, m.Topic, err)
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return txbox.Unavailable(fmt.Errorf("redis: event %s: key %q holds a value that is not a stream (another application's key?): %w", m.Event.ID, m.Topic, err))
	case hasPrefix(msg, "NOPERM", "NOAUTH", "WRONGPASS"):
		return txbox.Unavailable(fmt.Errorf("redis: event %s: the ACL forbids writing stream %q: %w", m.Event.ID, m.Topic, err))
	case hasPrefix(msg, "OOM", "MISCONF", "NOREPLICAS", "ERR max number of clients"):
		// Out of memory under maxmemory (noeviction), unable to persist,
		// too few replicas for min-replicas-to-write, too many clients.
		return txbox.Unavailable(fmt.Errorf("redis: the server cannot take event %s for %q now: %w", m.Event.ID, m.Topic, err))
	case unavailableReply(msg):
		return txbox.Unavailable(fmt.Errorf("redis: XADD event %s to %q: %w", m.Event.ID, m.Topic, err))
	}
	return fmt.Errorf("redis: event %s: the server refused XADD to %q: %w", m.Event.ID, m.Topic, err)
}

// Close closes the client.
func (p *Publisher) Close() error {
	if err := p.rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}

// Client is the underlying client, for health checks.
func (p *Publisher) Client() *redis.Client { return p.rdb }
