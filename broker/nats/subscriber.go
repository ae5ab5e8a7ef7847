package natsbroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/deadline"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/receive"
)

// SubscriberOptions configure a durable pull consumer.
type SubscriberOptions struct {
	// Stream to consume. Default "TXBOX".
	Stream string
	// Durable is the consumer name, one per consuming service (the inbox's
	// consumer name). Required.
	Durable string
	// FilterSubjects limit the consumer to these subjects (wildcards
	// allowed). Empty: every subject of the stream. More than one needs
	// nats-server 2.10 or later.
	FilterSubjects []string
	// AckWait is how long a delivery may go unacknowledged before JetStream
	// sends it again. Default 30s.
	AckWait time.Duration
	// MaxDeliver caps deliveries per message. 0 means -1: unlimited, since
	// the inbox decides when to park a message.
	MaxDeliver int
	// MaxAckPending caps unacknowledged deliveries. 0 keeps the server
	// default.
	MaxAckPending int
	// Connection is how to reach the server, the same as in Options.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *SubscriberOptions) withDefaults() error {
	if o.Durable == "" {
		return &txbox.ConfigError{Field: "NATS durable consumer name", Reason: "empty"}
	}
	o.Stream = cmp.Or(o.Stream, DefaultStream)
	o.AckWait = defaults.Positive(o.AckWait, defaultAckWait)
	o.MaxDeliver = cmp.Or(o.MaxDeliver, -1)
	o.Connection.withDefaults("txbox-subscriber")
	return nil
}

// Subscriber receives from a durable JetStream pull consumer.
type Subscriber struct {
	// The connection and JetStream on it; what OpenSubscriber made the
	// durable consumer with, to make it again when it is gone (remake).
	session
	cons   jetstream.Consumer
	log    *slog.Logger
	stream string
	cfg    jetstream.ConsumerConfig
	// checkMu guards checked, created and the question itself: Ack may run
	// beside Receive.
	checkMu sync.Mutex
	checked time.Time // when the subscriber last asked whether the consumer is gone
	// gen counts the durable consumer's incarnations this subscriber has
	// seen, and created is when the current one was made. JetStream finds
	// an ack's message by its stream sequence alone, so an ack of a
	// delivery from an earlier incarnation (the stream deleted and made
	// again) would settle whatever message of the new stream has that
	// sequence, and that message would never come: a delivery taken before
	// the consumer was made again is settled no more (see stale).
	gen       atomic.Uint64
	created   time.Time
	closeOnce sync.Once
}

var _ broker.Subscriber = (*Subscriber)(nil)

// longPoll bounds one pull request while Receive waits, so that a request
// the server dropped (a restart) is renewed rather than waited on forever.
const longPoll = 30 * time.Second

// OpenSubscriber connects to url and creates the durable consumer, or
// updates it to these options if it exists. Errors are as for Open.
func OpenSubscriber(ctx context.Context, url string, opts SubscriberOptions) (*Subscriber, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	sess, err := openSession(ctx, url, opts.Connection)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Subscriber, error) {
		sess.close()
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       opts.Durable,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxDeliver:    opts.MaxDeliver,
		MaxAckPending: opts.MaxAckPending,
	}
	// A single filter goes in FilterSubject, which servers before 2.10 know.
	switch len(opts.FilterSubjects) {
	case 0:
	case 1:
		cfg.FilterSubject = opts.FilterSubjects[0]
	default:
		cfg.FilterSubjects = slices.Clone(opts.FilterSubjects)
	}
	cons, err := sess.js.CreateOrUpdateConsumer(ctx, opts.Stream, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(&txbox.ConfigError{Field: "NATS stream", Reason: fmt.Sprintf("stream %q does not exist", opts.Stream)})
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			return fail(&txbox.ConfigError{Field: "NATS consumer", Reason: fmt.Sprintf("create consumer %q on stream %q: %v", opts.Durable, opts.Stream, err)})
		}
		return fail(txbox.Unavailable(fmt.Errorf("nats: create consumer %q on stream %q: %w", opts.Durable, opts.Stream, err)))
	}
	s := &Subscriber{session: sess, cons: cons, log: opts.Logger, stream: opts.Stream, cfg: cfg}
	if ci := cons.CachedInfo(); ci != nil {
		s.created = ci.Created
	}
	return s, nil
}

// Receive returns what the consumer has ready, up to max, or else waits for
// the first message and takes whatever arrived with it. It does not wait to
// fill a batch: the inbox should start on one message as soon as it exists.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	if err := deadline.Ended(ctx); err != nil {
		return nil, err
	}
	// Busy or not, now and then: another process may have made the
	// consumer again, and this one's deliveries from before must then
	// settle nothing.
	if err := s.checkDue(ctx); err != nil {
		return nil, err
	}
	out, err := s.fetchNoWait(ctx, max)
	if len(out) > 0 {
		return out, nil
	}
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, longPoll)
		batch, err := s.cons.Fetch(1, jetstream.FetchContext(wctx))
		if err == nil {
			out, err = s.collect(batch)
		}
		cancel()
		if len(out) > 0 {
			if max > 1 {
				more, _ := s.fetchNoWait(ctx, max-1) // extras are a bonus; the first is ours
				out = append(out, more...)
			}
			return out, nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && deadline.Ended(ctx) == nil {
			return nil, s.failed(ctx, err)
		}
		// Nothing came. A pull request to a consumer that is gone is not
		// answered either, so now and then ask whether it still exists.
		if err := s.checkDue(ctx); err != nil {
			return nil, err
		}
		if err := deadline.Ended(ctx); err != nil {
			return nil, err
		}
	}
}

// checkDue asks, once goneCheck has passed since the last time, whether
// the durable consumer is gone, and makes it again if so.
func (s *Subscriber) checkDue(ctx context.Context) error {
	if s.sinceCheck() < goneCheck || !s.gone(ctx) {
		return nil
	}
	return s.remake(ctx)
}

// goneCheck is how often a subscriber that receives nothing asks whether
// its durable consumer still exists.
const goneCheck = 5 * time.Second

// failed is the error of a fetch that failed with err: an outage, after
// making the durable consumer again if it is gone (the next Receive then
// uses it).
func (s *Subscriber) failed(ctx context.Context, err error) error {
	if s.gone(ctx) {
		if rerr := s.remake(ctx); rerr != nil {
			return rerr
		}
	}
	if errors.Is(err, txbox.ErrBrokerUnavailable) {
		return err
	}
	return txbox.Unavailable(fmt.Errorf("nats: fetch: %w", err))
}

// gone reports whether the durable consumer no longer exists: deleted with
// its stream (an operator re-creating the stream) or on its own. Either
// way, and when another process has made it again since this one last
// looked, the deliveries taken so far belong to an incarnation that is over.
func (s *Subscriber) gone(ctx context.Context) bool {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.goneLocked(ctx)
}

func (s *Subscriber) goneLocked(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	s.checked = time.Now()
	info, err := s.cons.Info(ictx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		s.gen.Add(1)
		return true
	}
	if err == nil && s.remadeLocked(info) {
		s.gen.Add(1)
		s.log.Warn("nats: durable consumer was made again by another process; deliveries taken before are settled no more (they come again)", "stream", s.stream, "durable", s.cfg.Durable)
		s.created = info.Created
	}
	return false
}

// remake makes the durable consumer again, as OpenSubscriber made it; while
// its stream is missing that fails, as an outage.
func (s *Subscriber) remake(ctx context.Context) error {
	// Its own time: the receive's may be spent by the fetch that found the
	// consumer gone.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cons, err := s.js.CreateOrUpdateConsumer(rctx, s.stream, s.cfg)
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if err != nil {
		return txbox.Unavailable(fmt.Errorf("nats: durable consumer %q on stream %q is gone and cannot be made again (stream deleted?): %w", s.cfg.Durable, s.stream, err))
	}
	s.cons = cons
	s.gen.Add(1)
	s.created = time.Time{} // the next check takes it

	s.log.Warn("nats: durable consumer was gone (its stream deleted and made again?); made it again: it delivers the stream from its start", "stream", s.stream, "durable", s.cfg.Durable)
	return nil
}

func (s *Subscriber) fetchNoWait(ctx context.Context, max int) ([]broker.Delivery, error) {
	batch, err := s.cons.FetchNoWait(max)
	if err == nil {
		var out []broker.Delivery
		if out, err = s.collect(batch); len(out) > 0 {
			return out, nil
		}
	}
	if err != nil {
		if err := deadline.Ended(ctx); err != nil {
			return nil, err
		}
		return nil, txbox.Unavailable(fmt.Errorf("nats: fetch: %w", err))
	}
	return nil, nil
}

func (s *Subscriber) collect(b jetstream.MessageBatch) ([]broker.Delivery, error) {
	var out []broker.Delivery
	gen, now := s.gen.Load(), time.Now()
	for m := range b.Messages() {
		out = append(out, &delivery{m: m, s: s, gen: gen, taken: now})
	}
	return out, b.Error()
}

// Close closes the connection OpenSubscriber dialled. The durable consumer
// stays on the server with its position, for the next run.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(s.session.close)
	return nil
}

type delivery struct {
	m     jetstream.Msg
	s     *Subscriber
	gen   uint64    // the durable consumer's incarnation it came from (Subscriber.gen)
	taken time.Time // when Receive returned it
}

// errStale is the ack of a delivery whose durable consumer was made again
// since: it is not sent (see Subscriber.gen); the message, if the new
// stream has it, comes again.
var errStale = errors.New("the durable consumer was made again since this delivery; not acknowledged, so that no message of the new stream is settled in its place")

// remadeLocked reports whether info is of another incarnation of the
// durable consumer than the one this subscriber's deliveries came from:
// made more than a second apart. A server restart moves the creation time
// it reports by a fraction of a second, so the times are not compared
// exactly; and it may roll the consumer's delivered and acknowledged
// sequences back to what it had stored (a kill before the store caught
// up), which is the same consumer on the same stream: its deliveries in
// hand still settle their own messages, so the sequences are no sign
// (TestManyHeldDeliveriesAckedAcrossBrokerRestart).
func (s *Subscriber) remadeLocked(info *jetstream.ConsumerInfo) bool {
	if s.created.IsZero() {
		s.created = info.Created
		return false
	}
	moved := info.Created.Sub(s.created)
	return moved > time.Second || moved < -time.Second
}

// settleCheck is how old a delivery may be before settling it first asks
// whether the consumer was made again since (unless the subscriber asked
// that recently): a delivery settled at once needs no question, one held
// for a while (an Ordered inbox waiting for its predecessor) gets one.
const settleCheck = time.Second

// stale reports whether the delivery's incarnation of the durable consumer
// is over.
func (d *delivery) stale() bool {
	if time.Since(d.taken) > settleCheck {
		d.s.checkMu.Lock()
		if time.Since(d.s.checked) > settleCheck || d.s.checked.Before(d.taken) {
			d.s.goneLocked(context.Background())
		}
		d.s.checkMu.Unlock()
	}
	return d.gen != d.s.gen.Load()
}

// sinceCheck is how long ago the subscriber last asked whether the
// consumer is gone.
func (s *Subscriber) sinceCheck() time.Duration {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return time.Since(s.checked)
}

// Event decodes the ce- headers (any case) and body. content-type stands
// in for a missing ce-datacontenttype, as the binding allows.
func (d *delivery) Event() (txbox.Event, error) {
	attrs := ce.Attrs{}
	var contentType string
	for k, vs := range d.m.Headers() {
		if len(vs) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if lk == headerContentType {
			contentType = vs[0]
		}
		if n, ok := strings.CutPrefix(lk, headerPrefix); ok && n != "" {
			if err := attrs.Add(n, vs[0]); err != nil {
				return txbox.Event{}, err
			}
		}
	}
	return attrs.Event(contentType, d.m.Data())
}

// Raw keeps subject, headers (repeated values joined with ", ") and body.
// ID is the Nats-Msg-Id, or stream and sequence when a foreign producer set
// none.
func (d *delivery) Raw() broker.RawMessage {
	h := map[string]string{}
	for k, vs := range d.m.Headers() {
		h[k] = strings.Join(vs, ", ")
	}
	id := d.m.Headers().Get(jetstream.MsgIDHeader)
	if id == "" {
		if md, err := d.m.Metadata(); err == nil {
			id = fmt.Sprintf("%s#%d", md.Stream, md.Sequence.Stream)
		}
	}
	return broker.RawMessage{Topic: d.m.Subject(), ID: id, Headers: h, Body: append([]byte(nil), d.m.Data()...)}
}

// Attempt is JetStream's delivery count.
func (d *delivery) Attempt() int {
	md, err := d.m.Metadata()
	if err != nil {
		return 0
	}
	return int(md.NumDelivered)
}

// Ack is a double ack: it returns once the server confirmed it, so "ack
// after commit" is known to have landed.
func (d *delivery) Ack(ctx context.Context) error {
	if d.stale() {
		return fmt.Errorf("nats: ack: %w", errStale)
	}
	if err := d.m.DoubleAck(ctx); err != nil {
		return settleErr("ack", err)
	}
	return nil
}

// AckAsync sends the ack without waiting for the server's confirmation: it
// is queued on the connection and flushed with whatever follows. The inbox
// uses it after its commit, so that the next event's transaction does not
// wait for the broker; an ack that is lost (the connection drops) only
// brings the message back after the ack wait, and the inbox row makes that
// a duplicate.
func (d *delivery) AckAsync() error {
	if d.stale() {
		return fmt.Errorf("nats: ack: %w", errStale)
	}
	if err := d.m.Ack(); err != nil {
		return settleErr("ack", err)
	}
	return nil
}

// Nak asks for redelivery after delay. NATS does not confirm a Nak; if it is
// lost, the ack wait brings the message back anyway.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return txbox.Unavailable(fmt.Errorf("nats: nak: %w", err))
	}
	if d.stale() {
		return nil // nothing to send back: its incarnation is over
	}
	var err error
	if delay > 0 {
		err = d.m.NakWithDelay(delay)
	} else {
		err = d.m.Nak()
	}
	if err != nil {
		return settleErr("nak", err)
	}
	return nil
}

// settleErr: acking twice is the caller's bug; anything else is the
// connection's.
func settleErr(what string, err error) error {
	if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return fmt.Errorf("nats: %s: %w", what, err)
	}
	return txbox.Unavailable(fmt.Errorf("nats: %s: %w", what, err))
}

var _ broker.AsyncAcker = (*delivery)(nil)

// AckWait is how long a delivery may stay unsettled before JetStream hands it
// out again (broker.AckWaiter).
func (s *Subscriber) AckWait() time.Duration { return s.cfg.AckWait }

var _ broker.AckWaiter = (*Subscriber)(nil)
