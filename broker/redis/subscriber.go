package redisbroker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/receive"
)

// SubscriberOptions configure one consumer of a consumer group.
type SubscriberOptions struct {
	// Streams to consume. Required.
	Streams []string
	// Group is the consumer group, one per consuming service (the inbox's
	// consumer name). Required.
	Group string
	// Consumer names this consumer within the group. Default
	// "<host>-<pid>-<random>", so that a restarted process's pending
	// entries are claimed after AckWait like a dead one's.
	Consumer string
	// StartID is where a group created now starts: "0" (default: every
	// entry in the stream) or "$" (only entries added from now on).
	StartID string
	// AckWait is how long an entry may stay pending before any consumer of
	// the group claims it again, and the longest precise Nak delay.
	// Default 30s.
	AckWait time.Duration
	// Connection is how to reach the server, the same as in Options.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *SubscriberOptions) withDefaults() error {
	switch {
	case len(o.Streams) == 0:
		return &txbox.ConfigError{Field: "Redis streams", Reason: "none given"}
	case slices.Contains(o.Streams, ""):
		return &txbox.ConfigError{Field: "Redis streams", Reason: "empty stream name"}
	case o.Group == "":
		return &txbox.ConfigError{Field: "Redis consumer group", Reason: "empty"}
	}
	o.StartID = cmp.Or(o.StartID, "0")
	o.AckWait = cmp.Or(o.AckWait, defaultAckWait)
	if o.Consumer == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	o.Connection.withDefaults("txbox-subscriber")
	return nil
}

// Subscriber consumes with XREADGROUP and claims stale entries with
// XAUTOCLAIM.
type Subscriber struct {
	rdb    *redis.Client
	opts   SubscriberOptions
	log    *slog.Logger
	poll   time.Duration
	mu     sync.Mutex
	cursor map[string]string // XAUTOCLAIM position per stream
	extra  []broker.Delivery // read beyond the caller's max, handed out next
}

var _ broker.Subscriber = (*Subscriber)(nil)

// OpenSubscriber connects to url and creates the group on every stream
// (and the stream, if missing) unless it exists. A key that is not a
// stream is a *txbox.ConfigError; other errors are as for Open.
func OpenSubscriber(ctx context.Context, url string, opts SubscriberOptions) (*Subscriber, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	rdb, err := connect(ctx, url, opts.Connection)
	if err != nil {
		return nil, err
	}
	s := &Subscriber{rdb: rdb, opts: opts, log: opts.Logger, cursor: map[string]string{}}
	if err := s.createGroups(ctx); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	s.poll = min(max(opts.AckWait/4, 10*time.Millisecond), maxPoll)
	return s, nil
}

// createGroups creates the group on every stream (and the stream) where it
// does not exist yet.
func (s *Subscriber) createGroups(ctx context.Context) error {
	for _, st := range s.opts.Streams {
		err := s.rdb.XGroupCreateMkStream(ctx, st, s.opts.Group, s.opts.StartID).Err()
		switch {
		case err == nil, isServerErr(err) && strings.HasPrefix(err.Error(), "BUSYGROUP"):
		case isServerErr(err) && !unavailableReply(err.Error()):
			return &txbox.ConfigError{Field: "Redis streams", Reason: fmt.Sprintf("create group %q on stream %q: %v", s.opts.Group, st, err)}
		default:
			return txbox.Unavailable(fmt.Errorf("redis: create group %q on stream %q: %w", s.opts.Group, st, err))
		}
	}
	return nil
}

// Receive returns entries pending longer than AckWait (claimed for this
// consumer) or else new ones, up to max; it waits for the first, polling
// for claimable entries at least once a second.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := deadline.Ended(ctx); err != nil {
			return nil, err
		}
		if len(s.extra) > 0 {
			n := min(max, len(s.extra))
			out := slices.Clone(s.extra[:n])
			s.extra = s.extra[n:]
			return out, nil
		}
		out, err := s.claim(ctx, max)
		if err != nil || len(out) > 0 {
			return out, s.receiveErr(ctx, "claim", err)
		}
		block := s.poll
		if d, ok := ctx.Deadline(); ok {
			// Leave the reply time to arrive before the deadline cuts it.
			block = min(block, time.Until(d)-20*time.Millisecond)
		}
		if block < time.Millisecond {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		out, err = s.read(ctx, max, block)
		if err != nil || len(out) > 0 {
			return out, s.receiveErr(ctx, "XREADGROUP", err)
		}
	}
}

func (s *Subscriber) receiveErr(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := deadline.Ended(ctx); cerr != nil {
		return cerr
	}
	if isServerErr(err) && strings.HasPrefix(err.Error(), "NOGROUP") {
		// The stream or the group was deleted: make them again (from
		// StartID), as a fresh subscription would, and let the caller
		// come back.
		s.cursor = map[string]string{}
		if cerr := s.createGroups(ctx); cerr != nil {
			return fmt.Errorf("redis: %s: %w; making the group again: %w", what, err, cerr)
		}
		return txbox.Unavailable(fmt.Errorf("redis: %s (group made again): %w", what, err))
	}
	if isServerErr(err) && !unavailableReply(err.Error()) {
		return fmt.Errorf("redis: %s: %w", what, err)
	}
	return txbox.Unavailable(fmt.Errorf("redis: %s: %w", what, err))
}

// read takes new entries, up to max in all; what a multi-stream read
// returns beyond max is kept for the next Receive.
func (s *Subscriber) read(ctx context.Context, max int, block time.Duration) ([]broker.Delivery, error) {
	streams := make([]string, 0, 2*len(s.opts.Streams))
	streams = append(streams, s.opts.Streams...)
	for range s.opts.Streams {
		streams = append(streams, ">")
	}
	res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: s.opts.Group, Consumer: s.opts.Consumer, Streams: streams, Count: int64(max), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []broker.Delivery
	for _, st := range res {
		for _, m := range st.Messages {
			out = append(out, &delivery{s: s, stream: st.Stream, m: m, attempt: 1})
		}
	}
	if len(out) > max {
		s.extra = append(s.extra, out[max:]...)
		out = out[:max]
	}
	return out, nil
}

// claim takes over entries pending longer than AckWait, up to max, and
// puts back those a long Nak delay still holds.
func (s *Subscriber) claim(ctx context.Context, max int) ([]broker.Delivery, error) {
	var out []broker.Delivery
	for _, st := range s.opts.Streams {
		if len(out) >= max {
			break
		}
		start := s.cursor[st]
		if start == "" {
			start = "0-0"
		}
		msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: st, Group: s.opts.Group, Consumer: s.opts.Consumer, MinIdle: s.opts.AckWait, Start: start, Count: int64(max - len(out)),
		}).Result()
		if err != nil {
			return out, err
		}
		s.cursor[st] = next
		if len(msgs) == 0 {
			continue
		}
		ds, err := s.claimed(ctx, st, msgs)
		if err != nil {
			return out, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// claimed looks up the delivery counts and Nak delays of claimed entries,
// puts back the ones still delayed and returns the rest.
func (s *Subscriber) claimed(ctx context.Context, stream string, msgs []redis.XMessage) ([]broker.Delivery, error) {
	dkey := delayedKey(stream, s.opts.Group)
	pipe := s.rdb.Pipeline()
	pend := make([]*redis.XPendingExtCmd, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
		pend[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: s.opts.Group, Start: m.ID, End: m.ID, Count: 1})
	}
	scores := pipe.ZMScore(ctx, dkey, ids...)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	notBefore := scores.Val()
	now := time.Now().UnixMilli()
	var out []broker.Delivery
	var due []any
	back := s.rdb.Pipeline()
	for i, m := range msgs {
		count := int64(0)
		if ps := pend[i].Val(); len(ps) == 1 {
			count = ps[0].RetryCount
		}
		if m.Values == nil {
			// Deleted from the stream while pending (Redis 6.2 returns
			// such entries empty): nothing to deliver.
			back.XAck(ctx, stream, s.opts.Group, m.ID)
			due = append(due, m.ID)
			continue
		}
		if i < len(notBefore) && notBefore[i] > 0 {
			if wait := int64(notBefore[i]) - now; wait > 0 {
				// Still delayed: restore the count the claim raised, and
				// an idle time that brings it back when the delay is over.
				idle := max(s.opts.AckWait.Milliseconds()-wait, 0)
				back.Do(ctx, "XCLAIM", stream, s.opts.Group, s.opts.Consumer, 0, m.ID, "IDLE", idle, "RETRYCOUNT", max(count-1, 0), "JUSTID")
				continue
			}
			due = append(due, m.ID)
		}
		out = append(out, &delivery{s: s, stream: stream, m: m, attempt: int(max(count, 1))})
	}
	if len(due) > 0 {
		back.ZRem(ctx, dkey, due...)
	}
	if back.Len() > 0 {
		if _, err := back.Exec(ctx); err != nil {
			// The delayed ones were claimed for us; they come back after
			// AckWait. The due ones are delivered all the same.
			s.log.Warn("redis: putting back delayed entries failed", "stream", stream, "err", err)
		}
	}
	return out, nil
}

// delayedKey is the sorted set holding Nak delays longer than the ack wait
// for a stream's group.
func delayedKey(stream, group string) string {
	return stream + ":txbox-delayed:" + group
}

// Close removes this consumer from its groups when it holds no pending
// entries (so consumers of past runs do not pile up), and closes the
// client. Its pending entries stay for others to claim.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, st := range s.opts.Streams {
		cs, err := s.rdb.XInfoConsumers(ctx, st, s.opts.Group).Result()
		if err != nil {
			break
		}
		for _, c := range cs {
			if c.Name == s.opts.Consumer && c.Pending == 0 {
				_ = s.rdb.XGroupDelConsumer(ctx, st, s.opts.Group, s.opts.Consumer).Err()
			}
		}
	}
	if err := s.rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}

type delivery struct {
	s       *Subscriber
	stream  string
	m       redis.XMessage
	attempt int
}

func fieldString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// Event decodes the ce_ fields (any case) and the data field.
func (d *delivery) Event() (txbox.Event, error) {
	attrs := ce.Attrs{}
	var body []byte
	for k, v := range d.m.Values {
		if k == FieldData {
			body = []byte(fieldString(v))
			continue
		}
		if len(k) > len(FieldPrefix) && strings.EqualFold(k[:len(FieldPrefix)], FieldPrefix) {
			if err := attrs.Add(strings.ToLower(k[len(FieldPrefix):]), fieldString(v)); err != nil {
				return txbox.Event{}, err
			}
		}
	}
	return attrs.Event("", body)
}

// Raw keeps the stream, every field but data (as headers, plus the entry id
// as "redis.id") and data as the body. ID is ce_id, or the stream and entry
// id when a foreign producer set none.
func (d *delivery) Raw() broker.RawMessage {
	h := map[string]string{"redis.id": d.m.ID}
	var body []byte
	for k, v := range d.m.Values {
		if k == FieldData {
			body = []byte(fieldString(v))
			continue
		}
		h[k] = fieldString(v)
	}
	id := h[FieldPrefix+broker.AttrID]
	if id == "" {
		id = d.stream + "#" + d.m.ID
	}
	return broker.RawMessage{Topic: d.stream, ID: id, Headers: h, Body: body}
}

// Attempt is the entry's delivery count in the group's pending list.
func (d *delivery) Attempt() int { return d.attempt }

// Ack removes the entry from the group's pending list (XACK), and any Nak
// delay recorded for it. An entry no longer pending (acked already) is an
// error.
func (d *delivery) Ack(ctx context.Context) error {
	pipe := d.s.rdb.Pipeline()
	ack := pipe.XAck(ctx, d.stream, d.s.opts.Group, d.m.ID)
	pipe.ZRem(ctx, delayedKey(d.stream, d.s.opts.Group), d.m.ID)
	if _, err := pipe.Exec(ctx); err != nil && ack.Err() != nil {
		return settleErr("XACK", ack.Err())
	}
	if ack.Val() == 0 {
		return fmt.Errorf("redis: XACK: entry %s of %q is not pending in group %q (acknowledged already)", d.m.ID, d.stream, d.s.opts.Group)
	}
	return nil
}

// Nak leaves the entry pending so that a claim brings it back after delay:
// XCLAIM ... IDLE (AckWait - delay); a delay longer than AckWait is also
// recorded in the group's delayed set, which claims honour.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	ackWait := d.s.opts.AckWait
	idle := max(ackWait-delay, 0).Milliseconds()
	pipe := d.s.rdb.Pipeline()
	claim := pipe.Do(ctx, "XCLAIM", d.stream, d.s.opts.Group, d.s.opts.Consumer, 0, d.m.ID, "IDLE", idle, "JUSTID")
	if delay > ackWait {
		notBefore := time.Now().Add(delay).UnixMilli()
		pipe.ZAdd(ctx, delayedKey(d.stream, d.s.opts.Group), redis.Z{Score: float64(notBefore), Member: d.m.ID})
	}
	if _, err := pipe.Exec(ctx); err != nil && claim.Err() != nil {
		return settleErr("XCLAIM", claim.Err())
	} else if err != nil {
		return settleErr("ZADD", err)
	}
	if ids, _ := claim.Slice(); len(ids) == 0 {
		return fmt.Errorf("redis: nak: entry %s of %q is not pending in group %q (acknowledged already)", d.m.ID, d.stream, d.s.opts.Group)
	}
	return nil
}

func settleErr(what string, err error) error {
	if isServerErr(err) && !unavailableReply(err.Error()) {
		return fmt.Errorf("redis: %s: %w", what, err)
	}
	return txbox.Unavailable(fmt.Errorf("redis: %s: %w", what, err))
}

// Consumer is this subscriber's consumer name in its group.
func (s *Subscriber) Consumer() string { return s.opts.Consumer }

// AckWait is how long a delivery may stay unsettled before another consumer of the group claiming it hands it
// out again (broker.AckWaiter).
func (s *Subscriber) AckWait() time.Duration { return s.opts.AckWait }

var _ broker.AckWaiter = (*Subscriber)(nil)
