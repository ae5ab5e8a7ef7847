// Package membroker is an in-memory broker for fast unit tests of the relay
// and the inbox. Its directory is broker/mem; like every broker adapter, the
// package is named <folder>broker:
//
//	import membroker "github.com/txbox/txbox/broker/mem"
//
// It keeps the semantics that matter to them (per-publish results, order,
// optional dedupe by event id, durable groups, Nak and ack-wait redelivery)
// and adds hooks to make the broker fail on demand.
//
// Messages travel in the same CloudEvents form a real broker carries: Publish
// runs broker.Attributes and a delivery decodes with
// broker.EventFromAttributes, so an event that a real broker would reject or
// mangle is rejected or mangled here too.
package membroker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/receive"
)

// HeaderPrefix is put before every CloudEvents attribute name in the headers
// a delivery's Raw shows, as the NATS and HTTP bindings do.
const HeaderPrefix = "ce-"

// defaultAckWait is how long a delivery may stay unacknowledged before it is
// delivered again; the same default as NATS JetStream.
const defaultAckWait = 30 * time.Second

// Options configure a Broker. The zero value keeps every message, without a
// size limit, and delivers it again after AckWait.
type Options struct {
	// Dedupe makes the broker store an event id only once, like
	// JetStream's duplicate window (here: forever). The second publish
	// still succeeds.
	Dedupe bool
	// MaxPayload, when > 0, makes a message whose payload is larger fail
	// with a permanent error, like a broker's size limit.
	MaxPayload int
	// AckWait is how long a delivery may stay unacknowledged before it is
	// delivered again. Default 30s.
	AckWait time.Duration
}

// withDefaults fills the fields left zero.
func (o *Options) withDefaults() {
	o.AckWait = defaults.Positive(o.AckWait, defaultAckWait)
}

// Broker is an in-memory broker. It is safe for concurrent use.
type Broker struct {
	dedupe     bool
	maxPayload int
	ackWait    time.Duration

	mu        sync.Mutex
	published []broker.Message // every confirmed publish, duplicates included
	log       []*entry         // what subscribers see (duplicates dropped with dedupe)
	seen      map[string]bool  // event ids in log, for dedupe
	dups      int
	groups    map[string]*group
	failN     int
	failErr   error
	failSkip  int // FailAfter: messages to pass before the failures start
	down      bool
	missing   map[string]bool // topics deleted with DeleteTopic
	refused   map[string]bool // event ids refused for good (Refuse)
	changed   chan struct{}   // closed and replaced whenever a receiver may have work
}

// entry is one stored message in wire form.
type entry struct {
	seq     uint64
	topic   string
	id      string
	headers map[string]string // prefixed CloudEvents attributes
	body    []byte
	gone    bool // deleted with its topic (RecreateTopic): never delivered again
}

// group is a durable consumer: it sees every stored message once, and again
// after a Nak or an expired ack wait.
type group struct {
	name    string
	topics  []string // subject-style patterns; empty means every topic
	next    int      // index in log of the first message never delivered
	pending map[uint64]*inflight
}

// inflight is a delivered but unacknowledged message.
type inflight struct {
	e        *entry
	attempts int
	due      time.Time // ready again then: ack-wait deadline, or end of a Nak delay
}

// New returns an empty broker.
func New(opts Options) *Broker {
	opts.withDefaults()
	return &Broker{
		dedupe:     opts.Dedupe,
		maxPayload: opts.MaxPayload,
		ackWait:    opts.AckWait,
		seen:       map[string]bool{},
		missing:    map[string]bool{},
		groups:     map[string]*group{},
		changed:    make(chan struct{}),
	}
}

var (
	_ broker.Publisher        = (*Broker)(nil)
	_ broker.OrderedPipeliner = (*Broker)(nil)
)

// PipelinesPerKey is true: a Publish call stores its messages in order,
// and after a retryable failure of a message it stores no later message of
// that key (aggregate id) in the call, as broker.OrderedPipeliner asks.
func (b *Broker) PipelinesPerKey() bool { return true }

// MaxPayload is Options.MaxPayload (0: none).
func (b *Broker) MaxPayload() int { return b.maxPayload }

// Dedupes reports whether Options.Dedupe was set.
func (b *Broker) Dedupes() bool { return b.dedupe }

// Publish stores the messages in order. Each message gets its own result: a
// bad message or a permanent failure injected with FailNext fails only
// itself; after a retryable failure the later messages of the same key
// (aggregate id) in the call fail too, unstored, so a key never has a gap.
func (b *Broker) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	b.mu.Lock()
	defer b.mu.Unlock()
	stored := false
	stopped := map[string]bool{} // keys with a retryable failure in this call
	for i, m := range msgs {
		key := m.Event.AggregateID
		if stopped[key] {
			// Counted against FailNext and FailAfter all the same: they
			// count the messages handed to Publish.
			if b.injectedLocked() == nil {
				errs[i] = txbox.Unavailable(fmt.Errorf("mem: not stored: an earlier message of key %q failed", key))
			} else {
				errs[i] = b.failErr
			}
			continue
		}
		ok, err := b.publishLocked(ctx, m)
		errs[i] = err
		stored = stored || ok
		if err != nil && !errors.Is(err, txbox.ErrPermanent) {
			stopped[key] = true
		}
	}
	if stored {
		b.wakeLocked()
	}
	return errs
}

// publishLocked stores one message; it reports whether subscribers have a
// new message. The caller holds b.mu.
func (b *Broker) publishLocked(ctx context.Context, m broker.Message) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, txbox.Unavailable(fmt.Errorf("mem: %w", err))
	}
	if b.down {
		return false, txbox.Unavailable(errors.New("mem: broker is down"))
	}
	if err := b.injectedLocked(); err != nil {
		return false, err
	}
	if b.refused[m.Event.ID] {
		return false, txbox.Permanent(fmt.Errorf("mem: event %s refused (Refuse)", m.Event.ID))
	}
	e, err := b.encode(m)
	if err != nil {
		return false, err
	}
	if b.missing[m.Topic] {
		return false, txbox.Unavailable(fmt.Errorf("mem: no destination for topic %q (deleted)", m.Topic))
	}
	b.published = append(b.published, cloneMessage(m))
	if b.dedupe && b.seen[e.id] {
		b.dups++
		return false, nil
	}
	b.seen[e.id] = true
	b.store(e)
	return true, nil
}

// injectedLocked counts one message against FailAfter and FailNext and
// returns the injected error if it is to fail. The caller holds b.mu.
func (b *Broker) injectedLocked() error {
	switch {
	case b.failSkip > 0:
		b.failSkip--
	case b.failN > 0:
		b.failN--
		return b.failErr
	}
	return nil
}

func (b *Broker) encode(m broker.Message) (*entry, error) {
	if m.Topic == "" {
		return nil, txbox.Permanent(fmt.Errorf("mem: empty topic for event %s", m.Event.ID))
	}
	if b.maxPayload > 0 && len(m.Event.Payload) > b.maxPayload {
		return nil, txbox.Permanent(fmt.Errorf("mem: payload of event %s is %d bytes, over the limit of %d", m.Event.ID, len(m.Event.Payload), b.maxPayload))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return nil, err
	}
	h := make(map[string]string, len(attrs))
	for _, a := range attrs {
		h[HeaderPrefix+a[0]] = a[1]
	}
	return &entry{topic: m.Topic, id: m.Event.ID, headers: h, body: append([]byte(nil), m.Event.Payload...)}, nil
}

// store appends e to the log; the caller holds b.mu.
func (b *Broker) store(e *entry) {
	e.seq = uint64(len(b.log)) + 1
	b.log = append(b.log, e)
}

// wakeLocked tells every waiting receiver to look again; the caller holds b.mu.
func (b *Broker) wakeLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// PublishRaw stores a message that did not come through Publish (a foreign
// producer's, or a malformed one), so tests can check how consumers treat it.
// Header names are used as given: CloudEvents attributes need HeaderPrefix.
func (b *Broker) PublishRaw(topic string, headers map[string]string, body []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.store(&entry{topic: topic, headers: maps.Clone(headers), body: append([]byte(nil), body...)})
	b.wakeLocked()
}

// Messages returns every message a Publish confirmed, in order, including
// duplicates that dedupe kept out of the subscribers' view.
func (b *Broker) Messages() []broker.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]broker.Message, len(b.published))
	for i, m := range b.published {
		out[i] = cloneMessage(m)
	}
	return out
}

// Duplicates counts publishes that dedupe dropped.
func (b *Broker) Duplicates() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dups
}

// FailNext makes the next n messages handed to Publish fail with err, as
// given (wrap it in txbox.Permanent or txbox.ErrBrokerUnavailable to pick the
// class). A failed message is not stored.
func (b *Broker) FailNext(n int, err error) { b.FailAfter(0, n, err) }

// FailAfter lets the next skip messages handed to Publish through and then
// fails n with err, as FailNext does: a failure in the middle of a
// pipelined run.
func (b *Broker) FailAfter(skip, n int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failSkip, b.failN, b.failErr = skip, n, err
}

// Refuse makes every publish of the event eventID fail for good (an
// error wrapping txbox.ErrPermanent, as a broker that will never take it:
// too big, an invalid subject), storing nothing, until Refuse(eventID,
// false): a poison event, then its cause fixed.
func (b *Broker) Refuse(eventID string, refuse bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused == nil {
		b.refused = map[string]bool{}
	}
	b.refused[eventID] = refuse
}

// DeleteTopic makes topic a missing destination, as a stream or topic
// deleted on a real broker is: a publish to it stores nothing and fails
// with an error wrapping txbox.ErrBrokerUnavailable (the way out failed,
// not the event) until CreateTopic. Every topic exists until deleted.
// Subscribers and stored messages are not affected.
func (b *Broker) DeleteTopic(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.missing[topic] = true
}

// CreateTopic makes a topic deleted with DeleteTopic take publishes again.
func (b *Broker) CreateTopic(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.missing, topic)
}

// RecreateTopic deletes topic with its stored messages and what every
// group holds of it (deliveries out, Nak'd, due again), and makes it again,
// empty, as an operator deleting a stream or topic and creating it again
// does. A delivery of it taken before settles nothing; sequences are never
// reused, so it cannot settle a message stored since.
func (b *Broker) RecreateTopic(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.log {
		if e.topic == topic && !e.gone {
			e.gone = true
			delete(b.seen, e.id)
		}
	}
	for _, g := range b.groups {
		for seq, p := range g.pending {
			if p.e.gone {
				delete(g.pending, seq)
			}
		}
	}
	delete(b.missing, topic)
	b.wakeLocked()
}

// SetDown makes the broker unreachable (true) or reachable again (false).
// While down, Publish, Receive, Ack and Nak fail with errors wrapping
// txbox.ErrBrokerUnavailable; stored messages are kept.
func (b *Broker) SetDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
	b.wakeLocked()
}

// Close does nothing: the broker lives as long as the test holds it.
func (b *Broker) Close() error { return nil }

// Subscribe returns a receiver for the durable group name. Receivers of one
// group share its messages; each group sees every stored message. A new group
// starts at the first stored message. topics are patterns in NATS subject
// style ("orders.*", "orders.>"); none means every topic. Subscribing again
// to an existing group replaces its topics, as updating a durable consumer
// does.
func (b *Broker) Subscribe(name string, topics ...string) broker.Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.groups[name]
	if g == nil {
		g = &group{name: name, pending: map[uint64]*inflight{}}
		b.groups[name] = g
	}
	g.topics = slices.Clone(topics)
	return &Subscriber{b: b, g: g}
}

// Subscriber receives the messages of one group.
type Subscriber struct {
	b      *Broker
	g      *group
	mu     sync.Mutex
	closed bool
}

var _ broker.Subscriber = (*Subscriber)(nil)

// ErrClosed is returned by Receive after Close.
var ErrClosed = errors.New("mem: subscriber closed")

// Receive blocks until at least one message is ready for the group, and
// returns up to max of them: messages due for redelivery first, then new
// ones in publish order.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	b := s.b
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		b.mu.Lock()
		if b.down {
			b.mu.Unlock()
			return nil, txbox.Unavailable(errors.New("mem: broker is down"))
		}
		now := time.Now()
		out, wake := b.takeLocked(s.g, max, now)
		changed := b.changed
		b.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		// Nothing ready: sleep until a publish, a Nak, a deadline or ctx.
		var timer *time.Timer
		var fire <-chan time.Time
		if !wake.IsZero() {
			timer = time.NewTimer(wake.Sub(now))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// takeLocked hands out up to max ready messages and reports when the next
// pending one becomes ready; the caller holds b.mu.
func (b *Broker) takeLocked(g *group, max int, now time.Time) ([]broker.Delivery, time.Time) {
	var out []broker.Delivery
	var wake time.Time
	seqs := slices.Sorted(maps.Keys(g.pending))
	for _, seq := range seqs {
		p := g.pending[seq]
		if p.due.After(now) {
			if wake.IsZero() || p.due.Before(wake) {
				wake = p.due
			}
			continue
		}
		if len(out) == max {
			break
		}
		out = append(out, b.deliverLocked(g, p, now))
	}
	for len(out) < max && g.next < len(b.log) {
		e := b.log[g.next]
		g.next++
		if e.gone || !matchAny(g.topics, e.topic) {
			continue
		}
		p := &inflight{e: e}
		g.pending[e.seq] = p
		out = append(out, b.deliverLocked(g, p, now))
	}
	return out, wake
}

func (b *Broker) deliverLocked(g *group, p *inflight, now time.Time) broker.Delivery {
	p.attempts++
	p.due = now.Add(b.ackWait)
	return &delivery{b: b, g: g, p: p, attempt: p.attempts}
}

// Close stops this receiver; its unacknowledged messages come back after the
// ack wait, to another receiver of the group.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.b.mu.Lock()
	s.b.wakeLocked()
	s.b.mu.Unlock()
	return nil
}

type delivery struct {
	b       *Broker
	g       *group
	p       *inflight
	attempt int
	settled bool // guarded by b.mu
}

func (d *delivery) Event() (txbox.Event, error) {
	attrs := ce.Attrs{}
	for k, v := range d.p.e.headers {
		if n, ok := strings.CutPrefix(k, HeaderPrefix); ok {
			attrs[n] = v // the keys of a map: no name twice
		}
	}
	return attrs.Event("", d.p.e.body)
}

func (d *delivery) Raw() broker.RawMessage {
	e := d.p.e
	id := e.id
	if id == "" {
		id = fmt.Sprintf("mem-%d", e.seq)
	}
	return broker.RawMessage{Topic: e.topic, ID: id, Headers: maps.Clone(e.headers), Body: append([]byte(nil), e.body...)}
}

func (d *delivery) Attempt() int { return d.attempt }

// Ack removes the message from its group for good.
func (d *delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, func() { delete(d.g.pending, d.p.e.seq) })
}

// Nak makes the message ready again once delay has passed.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	return d.settle(ctx, func() {
		d.p.due = time.Now().Add(max(delay, 0))
	})
}

func (d *delivery) settle(ctx context.Context, f func()) error {
	if err := ctx.Err(); err != nil {
		return txbox.Unavailable(fmt.Errorf("mem: %w", err))
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return txbox.Unavailable(errors.New("mem: broker is down"))
	}
	if d.settled {
		return errors.New("mem: delivery already acknowledged or rejected")
	}
	d.settled = true
	// Once the message was delivered again this copy is stale: the newer
	// delivery decides, so a slow handler cannot cancel a retry in flight.
	if d.p.attempts != d.attempt || d.g.pending[d.p.e.seq] != d.p {
		return nil
	}
	f()
	b.wakeLocked()
	return nil
}

// matchAny reports whether topic matches one of the patterns (all when none).
func matchAny(patterns []string, topic string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if match(p, topic) {
			return true
		}
	}
	return false
}

// match implements NATS subject matching: "*" is one token, ">" the rest.
func match(pattern, topic string) bool {
	pt := strings.Split(pattern, ".")
	tt := strings.Split(topic, ".")
	for i, p := range pt {
		if p == ">" {
			return len(tt) > i
		}
		if i >= len(tt) || (p != "*" && p != tt[i]) {
			return false
		}
	}
	return len(pt) == len(tt)
}

func cloneMessage(m broker.Message) broker.Message {
	m.Event.Headers = maps.Clone(m.Event.Headers)
	m.Event.Payload = append([]byte(nil), m.Event.Payload...)
	return m
}
