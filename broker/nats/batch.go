package natsbroker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// Atomic batch publish (nats-server 2.12+, stream setting allow_atomic):
// the messages of a batch carry these headers, the last one the commit, and
// the stream stores all of them, in order, or none. Like the fast-ingest
// batches of fast.go, preferred where the stream allows them, it lets the
// publisher keep many messages of one key in flight and still promise
// broker.OrderedPipeliner: a failed batch leaves no later message stored.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"

	// maxAtomicBatch is the server's default limit of messages in one
	// atomic batch (jetstream max_batch_size); a longer run is sent as
	// several batches, one after the other.
	maxAtomicBatch = 1000
	// maxBatchesInFlight bounds this publisher's open batches, well under
	// the server's default of 50 per stream, so that two relays on one
	// stream do not run into "too many inflight" in normal operation.
	maxBatchesInFlight = 8
)

var _ broker.OrderedPipeliner = (*Publisher)(nil)

// PipelinesPerKey reports whether Publish sends the messages of one key as
// batches that keep the broker.OrderedPipeliner promise: fast-ingest
// batches in gap-fail mode when the server is 2.14 or later and the stream
// allows them (allow_batched), else atomic batches when the server is 2.12
// or later and the stream allows those (allow_atomic). Options.CreateStream
// creates the stream with what the server has; Options.NoBatchPublish turns
// both off. Otherwise every message is its own publish and the relay keeps
// one unconfirmed message per key.
func (p *Publisher) PipelinesPerKey() bool { return p.batches != nil }

// supportsFastBatch reports whether a server version has fast-ingest
// batch publish (2.14+).
func supportsFastBatch(version string) bool {
	return versionAtLeast(version, 2, 14)
}

// supportsAtomicBatch reports whether a server version ("2.12.1") has
// atomic batch publish.
func supportsAtomicBatch(version string) bool {
	return versionAtLeast(version, 2, 12)
}

// BatchPublishSupport reports which batch publish a nats-server of this
// version ("2.14.0") has: fast-ingest batches (2.14+, stream setting
// allow_batched) and atomic batches (2.12+, allow_atomic). A stream made
// for this adapter should allow what the server has: the publisher then
// keeps many events of one aggregate in flight (see PipelinesPerKey).
func BatchPublishSupport(version string) (fast, atomic bool) {
	return supportsFastBatch(version), supportsAtomicBatch(version)
}

// versionAtLeast compares the major and minor numbers of a server version;
// an unparsable one is "no".
func versionAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// keyOf is the ordering key of a message: its aggregate.
func keyOf(m broker.Message) string {
	return m.Event.AggregateType + "\x00" + m.Event.AggregateID
}

// publishBatched publishes msgs with atomic batches for every key that has
// more than one message in the call, and the rest one message each through
// publishEach, all at once.
func (p *Publisher) publishBatched(ctx context.Context, msgs []broker.Message) []error {
	byKey := make(map[string][]int, len(msgs))
	var keys []string
	for i, m := range msgs {
		k := keyOf(m)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	if len(keys) == len(msgs) {
		return p.publishEach(ctx, msgs)
	}
	errs := make([]error, len(msgs))
	var singles []int
	var wg sync.WaitGroup
	for _, k := range keys {
		idx := byKey[k]
		if len(idx) == 1 {
			singles = append(singles, idx[0])
			continue
		}
		run := make([]broker.Message, len(idx))
		for j, i := range idx {
			run[j] = msgs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, err := range p.publishRun(ctx, run) {
				errs[idx[j]] = err
			}
		}()
	}
	if len(singles) > 0 {
		one := make([]broker.Message, len(singles))
		for j, i := range singles {
			one[j] = msgs[i]
		}
		for j, err := range p.publishEach(ctx, one) {
			errs[singles[j]] = err
		}
	}
	wg.Wait()
	return errs
}

// publishRun publishes the messages of one key, in order, as batches (fast
// or atomic) of at most maxAtomicBatch, each after the previous one ended.
// A message that cannot be encoded fails permanently and is left out, as
// publishEach would. When the stream stores only a prefix of a batch (a
// fast batch ends at a message it refuses; an atomic batch that holds a
// message too large for the stream, an event id it already holds, a subject
// of another stream... stores nothing), that prefix is confirmed and the
// rest of the run is sent again one message at a time, which gives each
// message its own verdict. An outage fails the batch and everything after
// it with txbox.ErrBrokerUnavailable.
func (p *Publisher) publishRun(ctx context.Context, run []broker.Message) []error {
	errs := make([]error, len(run))
	type encoded struct {
		i   int
		msg *nats.Msg
	}
	var ok []encoded
	for i, m := range run {
		nm, _, err := p.encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		ok = append(ok, encoded{i, nm})
	}
	// The publisher checked the server at Open; after a reconnect it may
	// be another one (a cluster in a rolling downgrade). A server without
	// the protocol would take a batch as plain publishes, which promise
	// nothing after a failure: send one at a time instead.
	if v := p.nc.ConnectedServerVersion(); v != "" && !(p.fast && supportsFastBatch(v) || !p.fast && supportsAtomicBatch(v)) {
		idx := make([]int, len(ok))
		for j, e := range ok {
			idx[j] = e.i
		}
		p.publishInOrder(ctx, run, idx, errs)
		return errs
	}
	for start := 0; start < len(ok); start += maxAtomicBatch {
		chunk := ok[start:min(start+maxAtomicBatch, len(ok))]
		nms := make([]*nats.Msg, len(chunk))
		for j, e := range chunk {
			nms[j] = e.msg
		}
		var stored int
		var err error
		if p.fast {
			stored, err = p.fastBatch(ctx, nms)
		} else {
			err = p.commitBatch(ctx, nms)
			if err == nil {
				stored = len(nms)
			}
		}
		if err == nil && stored == len(nms) {
			p.committed.Add(1)
			continue
		}
		if errors.Is(err, txbox.ErrBrokerUnavailable) {
			for _, e := range ok[start:] {
				errs[e.i] = err
			}
			return errs
		}
		// The stream stored the first stored messages of the batch and
		// nothing after them.
		p.log.Debug("nats: batch refused or cut short, publishing the rest one at a time", "stored", stored, "messages", len(ok)-start, "err", err)
		rest := make([]int, 0, len(ok)-start-stored)
		for _, e := range ok[start+stored:] {
			rest = append(rest, e.i)
		}
		p.publishInOrder(ctx, run, rest, errs)
		return errs
	}
	return errs
}

// batchAck is the stream's answer to a batch commit: a PubAck naming the
// batch and its size, or an error.
type batchAck struct {
	Error  *jetstream.APIError `json:"error,omitempty"`
	Stream string              `json:"stream"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
}

// commitBatch sends msgs as one atomic batch and waits for the commit's
// answer. Only the commit asks for a reply: the stream keeps the batch
// apart until then and answers the commit with the outcome of the whole
// batch, including a message lost on the way ("batch is incomplete").
func (p *Publisher) commitBatch(ctx context.Context, msgs []*nats.Msg) error {
	if err := ctx.Err(); err != nil {
		return txbox.Unavailable(fmt.Errorf("nats: publish: %w", err))
	}
	select {
	case p.batches <- struct{}{}:
		defer func() { <-p.batches }()
	case <-ctx.Done():
		return txbox.Unavailable(fmt.Errorf("nats: waiting for a free batch slot: %w", ctx.Err()))
	}
	if st := p.nc.Status(); st != nats.CONNECTED {
		return txbox.Unavailable(fmt.Errorf("nats: publish: connection is %s", st))
	}
	id := newBatchID()
	last := len(msgs) - 1
	for j, m := range msgs {
		m.Header[headerBatchID] = []string{id}
		m.Header[headerBatchSeq] = []string{strconv.Itoa(j + 1)}
		if j < last {
			if err := p.nc.PublishMsg(m); err != nil {
				return batchSendErr(err)
			}
		}
	}
	msgs[last].Header[headerBatchCommit] = []string{"1"}
	rctx, cancel := context.WithTimeout(ctx, p.ackTimeout)
	defer cancel()
	resp, err := p.nc.RequestMsgWithContext(rctx, msgs[last])
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("nats: atomic batch on %q: %w", msgs[0].Subject, err)
		}
		return batchSendErr(err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return txbox.Unavailable(fmt.Errorf("nats: atomic batch on %q: unreadable answer %q: %w", msgs[0].Subject, resp.Data, err))
	}
	if ack.Error != nil {
		return fmt.Errorf("nats: atomic batch on %q refused: %w", msgs[0].Subject, ack.Error)
	}
	if ack.Batch != id || ack.Count != len(msgs) {
		// Not the answer to this batch: what was stored is unknown, so
		// nothing counts as confirmed; a resend is deduplicated by event id.
		return txbox.Unavailable(fmt.Errorf("nats: atomic batch on %q: answer for batch %q of %d messages, sent %q of %d",
			msgs[0].Subject, ack.Batch, ack.Count, id, len(msgs)))
	}
	return nil
}

// batchSendErr classifies a failure to hand a batch over or to hear its
// commit. A message the client refuses to send (the batch headers took it
// over max_payload) is not an outage: the caller sends the messages one at
// a time, without those headers. Anything else is the connection or the
// deadline, so the outcome is unknown.
func batchSendErr(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrBadHeaderMsg) || errors.Is(err, nats.ErrInvalidMsg) {
		return fmt.Errorf("nats: atomic batch: %w", err)
	}
	return txbox.Unavailable(fmt.Errorf("nats: atomic batch: %w", err))
}

// publishInOrder publishes msgs[idx...] one at a time, each after the
// previous one's PubAck, and stops at the first failure that is not
// permanent: the messages after it fail too, unsent, so none of the key is
// stored after a gap.
func (p *Publisher) publishInOrder(ctx context.Context, msgs []broker.Message, idx []int, errs []error) {
	lookups := map[string]error{}
	for n, i := range idx {
		nm, size, err := p.encode(msgs[i])
		if err != nil {
			errs[i] = err
			continue
		}
		err = p.publishSync(ctx, nm)
		if err == nil {
			continue
		}
		errs[i] = p.classify(ctx, nm.Subject, size, err, lookups)
		if errors.Is(errs[i], txbox.ErrPermanent) {
			continue
		}
		for _, later := range idx[n+1:] {
			errs[later] = fmt.Errorf("nats: event %s not sent: event %s before it, of the same key, failed: %w", msgs[later].Event.ID, msgs[i].Event.ID, errs[i])
		}
		return
	}
}

// publishSync publishes one message and waits for its PubAck, without
// nats.go's resend after "no responders" (the caller classifies that).
func (p *Publisher) publishSync(ctx context.Context, nm *nats.Msg) error {
	if st := p.nc.Status(); st != nats.CONNECTED {
		return txbox.Unavailable(fmt.Errorf("connection is %s", st))
	}
	actx, cancel := context.WithTimeout(ctx, p.ackTimeout)
	defer cancel()
	ack, err := p.js.PublishMsg(actx, nm, jetstream.WithRetryAttempts(0))
	if err == nil && ack.Duplicate {
		p.dups.Add(1)
	}
	return err
}

// newBatchID is a random batch id (the server allows up to 64 bytes).
func newBatchID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
