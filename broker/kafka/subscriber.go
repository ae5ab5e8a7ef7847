package kafkabroker

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/receive"
)

// SubscriberOptions configure a consumer-group member.
type SubscriberOptions struct {
	// Group is the consumer group, one per consuming service (the inbox's
	// consumer name). Required.
	Group string
	// Topics to consume. Required.
	Topics []string
	// Regex makes Topics regular expressions (Go syntax, matched against
	// whole topic names as Kafka clients do); new matching topics are
	// picked up at the next metadata refresh (kgo.MetadataMaxAge, 5 minutes
	// by default).
	Regex bool
	// AckWait is how long a delivery may stay neither acknowledged nor
	// Nak'd before the subscriber hands it out again. Default 30s; negative
	// disables it (an unsettled delivery then comes back only after a
	// restart or a rebalance).
	AckWait time.Duration
	// CommitTimeout bounds the offset commit of one Ack even when its
	// context has no deadline. Default 10s.
	CommitTimeout time.Duration
	// Connection is how to reach the cluster, the same as in Options.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *SubscriberOptions) withDefaults() error {
	if o.Group == "" {
		return &txbox.ConfigError{Field: "Kafka consumer group", Reason: "empty"}
	}
	if len(o.Topics) == 0 {
		return &txbox.ConfigError{Field: "Kafka topics", Reason: "none given"}
	}
	for _, t := range o.Topics {
		if o.Regex {
			if _, err := regexp.Compile(t); err != nil {
				return &txbox.ConfigError{Field: "Kafka topics", Reason: fmt.Sprintf("%q is not a regular expression: %v", t, err)}
			}
		} else if err := ValidateTopic(t); err != nil {
			return &txbox.ConfigError{Field: "Kafka topics", Reason: err.Error()}
		}
	}
	o.AckWait = cmp.Or(o.AckWait, defaultAckWait) // negative disables it
	o.CommitTimeout = defaults.Positive(o.CommitTimeout, defaultCommitTimeout)
	o.Connection.withDefaults("txbox-subscriber")
	return nil
}

// Subscriber receives from a Kafka consumer group and commits offsets as
// deliveries are acknowledged. See the package documentation for what Ack
// and Nak mean on Kafka.
type Subscriber struct {
	cl            *kgo.Client
	log           *slog.Logger
	ackWait       time.Duration
	commitTimeout time.Duration

	recvMu sync.Mutex // one Receive at a time

	commitMu sync.Mutex // commits leave in watermark order

	mu     sync.Mutex
	parts  map[topicPartition]*partState
	gen    uint64
	timers timerHeap
	wake   context.CancelFunc // cancels a waiting poll when a redelivery is scheduled
	closed bool
	// AckAsync's (asyncack.go): the partitions to commit, the committer's
	// wake-up and its end; nil until the first AckAsync.
	dirty         map[topicPartition]bool
	kick          chan struct{}
	committerDone chan struct{}

	closeOnce sync.Once
}

var _ broker.Subscriber = (*Subscriber)(nil)

type topicPartition struct {
	topic     string
	partition int32
}

// partState tracks one assigned partition.
type partState struct {
	gen       uint64
	pending   []*entry // read and not yet acknowledged, ascending offsets
	next      int64    // offset after the last record read; -1 before the first
	nextEpoch int32
	committed int64 // last offset committed by this member; -1 for none
}

// watermark is the offset to commit: the oldest unacknowledged record, or
// the one after the last read.
func (ps *partState) watermark() (int64, int32) {
	if len(ps.pending) > 0 {
		return ps.pending[0].offset, ps.pending[0].epoch
	}
	return ps.next, ps.nextEpoch
}

func (ps *partState) remove(e *entry) {
	i := sort.Search(len(ps.pending), func(i int) bool { return ps.pending[i].offset >= e.offset })
	if i < len(ps.pending) && ps.pending[i] == e {
		ps.pending = slices.Delete(ps.pending, i, i+1)
	}
}

// entry is one record the subscriber read and has not seen acknowledged.
type entry struct {
	tp       topicPartition
	offset   int64
	epoch    int32
	gen      uint64
	rec      *kgo.Record
	attempts int
	out      *delivery // the delivery handed out and not yet settled; nil while waiting to be handed out again
	done     bool
}

// timer brings an entry back: after a Nak (d nil) or, for the hand-out d,
// after the ack wait.
type timer struct {
	at time.Time
	e  *entry
	d  *delivery
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// OpenSubscriber connects to the brokers and joins the group in the
// background; a new group starts at the earliest offset. Errors are as for
// Open.
func OpenSubscriber(ctx context.Context, brokers string, opts SubscriberOptions) (*Subscriber, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Subscriber{log: opts.Logger, ackWait: opts.AckWait, commitTimeout: opts.CommitTimeout, parts: map[topicPartition]*partState{}}
	consume := []kgo.Opt{
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics...),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	}
	if opts.Regex {
		consume = append(consume, kgo.ConsumeRegex())
	}
	cl, err := newClient(brokers, opts.Connection, nil, consume...)
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, cl, opts.ConnectTimeout); err != nil {
		cl.Close()
		return nil, err
	}
	s.cl = cl
	return s, nil
}

// Client is the underlying franz-go client, for health checks and metrics.
func (s *Subscriber) Client() *kgo.Client { return s.cl }

func (s *Subscriber) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range assigned {
		for _, p := range ps {
			s.gen++
			s.parts[topicPartition{t, p}] = &partState{gen: s.gen, next: -1, committed: -1}
		}
	}
}

// revoked commits what was acknowledged of the partitions leaving this
// member, so that their next owner starts there.
func (s *Subscriber) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	commits := map[string]map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for t, ps := range revoked {
		for _, p := range ps {
			tp := topicPartition{t, p}
			st := s.parts[tp]
			if st == nil {
				continue
			}
			if off, epoch := st.watermark(); off > st.committed {
				if commits[t] == nil {
					commits[t] = map[int32]kgo.EpochOffset{}
				}
				commits[t][p] = kgo.EpochOffset{Epoch: epoch, Offset: off}
			}
			delete(s.parts, tp)
		}
	}
	s.mu.Unlock()
	if len(commits) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.commitTimeout)
	defer cancel()
	if err := commitErr(cl, cctx, commits); err != nil {
		s.log.Warn("kafka: committing revoked partitions failed; their next owner delivers some records again", "err", err)
	}
}

// lost drops the partitions without committing: the group has moved on and
// a commit would be refused.
func (s *Subscriber) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range lost {
		for _, p := range ps {
			delete(s.parts, topicPartition{t, p})
		}
	}
}

// Receive returns records due again (Nak'd or past their ack wait) first;
// otherwise it waits for new records and returns what arrived, up to max,
// without waiting to fill a batch.
func (s *Subscriber) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, next := s.due(max)
		if len(out) > 0 {
			return out, nil
		}
		pctx, cancel := context.WithCancel(ctx)
		if !next.IsZero() {
			cancel()
			pctx, cancel = context.WithDeadline(ctx, next)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			cancel()
			return nil, txbox.Unavailable(fmt.Errorf("kafka: receive: %w", kgo.ErrClientClosed))
		}
		s.wake = cancel
		s.mu.Unlock()
		fs := s.cl.PollRecords(pctx, max)
		s.mu.Lock()
		s.wake = nil
		s.mu.Unlock()
		cancel()
		if out := s.take(fs.Records()); len(out) > 0 {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fs.IsClientClosed() {
			return nil, txbox.Unavailable(fmt.Errorf("kafka: receive: %w", kgo.ErrClientClosed))
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			case t == "":
				errs = append(errs, err) // the group, not a partition
			default:
				errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err))
			}
		})
		if len(errs) > 0 {
			return nil, txbox.Unavailable(fmt.Errorf("kafka: fetch: %w", errors.Join(errs...)))
		}
		// The poll ended for a redelivery coming due, or for a Nak: look
		// again.
	}
}

// due hands out the entries whose timers have fired, up to max, and returns
// when the next one fires (zero if none).
func (s *Subscriber) due(max int) ([]broker.Delivery, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []broker.Delivery
	now := time.Now()
	for len(s.timers) > 0 && len(out) < max {
		t := s.timers[0]
		if t.at.After(now) {
			break
		}
		heap.Pop(&s.timers)
		e := t.e
		if e.done || !s.current(e) {
			continue
		}
		if t.d != nil {
			// Ack wait: only if that hand-out is still out, unsettled.
			if e.out != t.d {
				continue
			}
			e.out = nil
		} else if e.out != nil {
			continue
		}
		out = append(out, s.handout(e, now))
	}
	var next time.Time
	if len(s.timers) > 0 {
		next = s.timers[0].at
	}
	return out, next
}

// current reports whether e's partition is still assigned as it was when e
// was read. Called locked.
func (s *Subscriber) current(e *entry) bool {
	ps := s.parts[e.tp]
	return ps != nil && ps.gen == e.gen
}

// take registers freshly read records and hands them out.
func (s *Subscriber) take(recs []*kgo.Record) []broker.Delivery {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]broker.Delivery, 0, len(recs))
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		ps := s.parts[tp]
		if ps == nil || r.Offset < ps.next {
			// Not ours (revoked while the poll ran), or already read: its
			// owner, or the entry we hold, delivers it.
			continue
		}
		ps.next, ps.nextEpoch = r.Offset+1, r.LeaderEpoch
		e := &entry{tp: tp, offset: r.Offset, epoch: r.LeaderEpoch, gen: ps.gen, rec: r}
		ps.pending = append(ps.pending, e)
		out = append(out, s.handout(e, now))
	}
	return out
}

// handout makes a new delivery of e. Called locked.
func (s *Subscriber) handout(e *entry, now time.Time) *delivery {
	e.attempts++
	d := &delivery{s: s, e: e, rec: e.rec, attempt: e.attempts}
	e.out = d
	if s.ackWait > 0 {
		heap.Push(&s.timers, timer{at: now.Add(s.ackWait), e: e, d: d})
	}
	return d
}

// Close leaves the group, committing what was acknowledged, and closes the
// client. The group keeps its committed offsets for the next run.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.wake != nil {
			s.wake()
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.commitTimeout)
		defer cancel()
		s.flushAcks(ctx)
		if err := s.cl.LeaveGroupContext(ctx); err != nil {
			s.log.Debug("kafka: leaving the group", "err", err)
		}
		s.cl.Close()
	})
	return nil
}

// commit commits the watermark of tp if it moved past what this member last
// committed. Commits are serialised so that a later watermark never lands
// before an earlier one.
func (s *Subscriber) commit(ctx context.Context, tp topicPartition) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	ps := s.parts[tp]
	if ps == nil {
		s.mu.Unlock()
		return nil
	}
	off, epoch := ps.watermark()
	gen := ps.gen
	if off <= ps.committed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, s.commitTimeout)
	defer cancel()
	err := commitErr(s.cl, cctx, map[string]map[int32]kgo.EpochOffset{tp.topic: {tp.partition: {Epoch: epoch, Offset: off}}})
	if err != nil {
		var kerrE *kerr.Error
		if errors.As(err, &kerrE) {
			// The group answered: a rebalance or a fenced member. The
			// records come back to whoever owns the partition next.
			return fmt.Errorf("kafka: commit offset %d of %s/%d: %w", off, tp.topic, tp.partition, err)
		}
		return txbox.Unavailable(fmt.Errorf("kafka: commit offset %d of %s/%d: %w", off, tp.topic, tp.partition, err))
	}
	s.mu.Lock()
	if ps := s.parts[tp]; ps != nil && ps.gen == gen && off > ps.committed {
		ps.committed = off
	}
	s.mu.Unlock()
	return nil
}

// commitErr commits synchronously and returns the first error, of the
// request or of a partition.
func commitErr(cl *kgo.Client, ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	var rerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && rerr == nil {
					rerr = err
				}
			}
		}
	})
	return rerr
}

type delivery struct {
	s       *Subscriber
	e       *entry
	rec     *kgo.Record
	attempt int
}

// Event decodes the ce_ headers (any case) and the value. content-type
// stands in for datacontenttype, as the binding maps it; a ce_datacontenttype
// header from a foreign producer is accepted too.
func (d *delivery) Event() (txbox.Event, error) {
	attrs := ce.Attrs{}
	var contentType string
	for _, h := range d.rec.Headers {
		lk := strings.ToLower(h.Key)
		if lk == headerContentType {
			contentType = string(h.Value)
			continue
		}
		if n, ok := strings.CutPrefix(lk, HeaderPrefix); ok && n != "" {
			if err := attrs.Add(n, string(h.Value)); err != nil {
				return txbox.Event{}, err
			}
		}
	}
	return attrs.Event(contentType, d.rec.Value)
}

// Raw keeps topic, headers (repeated keys joined with ", ") and value. ID is
// the record's position, "topic/partition/offset", which a redelivery of
// the same record repeats.
func (d *delivery) Raw() broker.RawMessage {
	h := map[string]string{}
	for _, rh := range d.rec.Headers {
		if v, ok := h[rh.Key]; ok {
			h[rh.Key] = v + ", " + string(rh.Value)
		} else {
			h[rh.Key] = string(rh.Value)
		}
	}
	return broker.RawMessage{
		Topic:   d.rec.Topic,
		ID:      fmt.Sprintf("%s/%d/%d", d.rec.Topic, d.rec.Partition, d.rec.Offset),
		Headers: h,
		Body:    append([]byte(nil), d.rec.Value...),
	}
}

// Attempt counts this subscriber's deliveries of the record since it read
// it from Kafka: 1 for the first, more after a Nak or an ack wait. It starts
// at 1 again after a restart or a rebalance.
func (d *delivery) Attempt() int { return d.attempt }

// Ack marks the record processed and commits its partition's watermark (see
// the package documentation). It returns once the commit is confirmed, or
// at once when an older record of the partition is still unacknowledged.
// Acknowledging twice is a no-op.
func (d *delivery) Ack(ctx context.Context) error {
	s, e := d.s, d.e
	s.mu.Lock()
	if e.done {
		s.mu.Unlock()
		return nil
	}
	if !s.current(e) {
		s.mu.Unlock()
		return fmt.Errorf("kafka: ack of %s/%d/%d: the partition was reassigned before the ack; its next owner delivers the record again", e.tp.topic, e.tp.partition, e.offset)
	}
	e.done, e.out, e.rec = true, nil, nil
	s.parts[e.tp].remove(e)
	s.mu.Unlock()
	return s.commit(ctx, e.tp)
}

// Nak hands the record out again after delay (see the package
// documentation); the partition's committed offset stays below it until it
// is acknowledged. A Nak of a delivery already settled, or already handed
// out again after its ack wait, is a no-op.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return txbox.Unavailable(fmt.Errorf("kafka: nak: %w", err))
	}
	s, e := d.s, d.e
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.done || e.out != d || !s.current(e) {
		return nil
	}
	e.out = nil
	heap.Push(&s.timers, timer{at: time.Now().Add(max(delay, 0)), e: e})
	if s.wake != nil {
		s.wake()
	}
	return nil
}

// AckWait is how long a delivery may stay unsettled before the adapter hands it
// out again (broker.AckWaiter).
func (s *Subscriber) AckWait() time.Duration { return s.ackWait }

var _ broker.AckWaiter = (*Subscriber)(nil)
