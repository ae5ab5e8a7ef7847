package natsbroker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
)

// Fast-ingest batch publish (nats-server 2.14+, stream setting
// allow_batched): each message of a batch names the batch, its position and
// the operation in its reply subject,
//
//	<inbox>.<batch id>.<flow>.<gap mode>.<batch seq>.<operation>.$FI
//
// and the stream stores it at once, as a plain publish would. With gap mode
// "fail" a message that fails or goes missing ends the batch: the stream
// stores nothing of the batch after it and answers with a PubAck whose
// "count" is the prefix it stored. That is the promise of
// broker.OrderedPipeliner, at the cost of one write per message (an atomic
// batch stages every message first and writes it again at the commit).
const (
	fastOpStart  = 0
	fastOpAppend = 1
	fastOpCommit = 2
	// fastFlow asks for a flow-control ack every fastFlow messages. The
	// publisher does not wait for them: a batch is at most maxAtomicBatch
	// messages, and at most maxBatchesInFlight are open, far below the
	// stream's ingest queue (100,000 messages by default); a message the
	// server drops anyway ends the batch like any gap.
	fastFlow = 500
)

// fastAnswer is the end of a fast batch as the stream reported it: stored
// is the prefix it stored, or -1 when it said nothing usable (err).
type fastAnswer struct {
	stored int
	err    error
}

// fastInbox routes the stream's answers to the batches waiting for them.
type fastInbox struct {
	prefix string
	sub    *nats.Subscription
	mu     sync.Mutex
	wait   map[string]chan fastAnswer
}

// startFastInbox subscribes to the replies of every fast batch of the
// publisher.
func startFastInbox(nc *nats.Conn) (*fastInbox, error) {
	in := &fastInbox{prefix: nc.NewInbox(), wait: map[string]chan fastAnswer{}}
	sub, err := nc.Subscribe(in.prefix+".>", in.handle)
	if err != nil {
		return nil, err
	}
	// Answers are small and a batch waits for them: never drop one
	// because a slow consumer limit was reached.
	_ = sub.SetPendingLimits(-1, -1)
	in.sub = sub
	return in, nil
}

// fastReply is what the stream sends to a fast batch's reply subjects: a
// flow-control ack, a gap or error notice (type "ack", "gap", "err"), or a
// PubAck or API error (no type).
type fastReply struct {
	Type  string              `json:"type"`
	Error *jetstream.APIError `json:"error,omitempty"`
	Batch string              `json:"batch"`
	Count int                 `json:"count"`
}

func (in *fastInbox) handle(m *nats.Msg) {
	// <prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI
	toks := strings.Split(strings.TrimPrefix(m.Subject, in.prefix+"."), ".")
	if len(toks) != 6 {
		return
	}
	id, op := toks[0], toks[4]
	if bytes.HasPrefix(m.Data, []byte(`{"type":`)) {
		return // flow control and notices, the most frequent answers
	}
	var r fastReply
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Type != "" {
		return // flow control and notices: the PubAck is what counts
	}
	var a fastAnswer
	switch {
	case r.Error == nil && r.Batch == id:
		a = fastAnswer{stored: r.Count}
	case r.Error != nil && op == strconv.Itoa(fastOpCommit):
		// The commit itself was refused without a PubAck (the batch was
		// unknown by then, or never started): what was stored is unknown.
		a = fastAnswer{stored: -1, err: r.Error}
	default:
		// An error answering one message in the middle: the PubAck that
		// ends the batch follows.
		return
	}
	in.mu.Lock()
	ch := in.wait[id]
	delete(in.wait, id)
	in.mu.Unlock()
	if ch != nil {
		ch <- a
	}
}

func (in *fastInbox) register(id string) chan fastAnswer {
	ch := make(chan fastAnswer, 1)
	in.mu.Lock()
	in.wait[id] = ch
	in.mu.Unlock()
	return ch
}

func (in *fastInbox) forget(id string) {
	in.mu.Lock()
	delete(in.wait, id)
	in.mu.Unlock()
}

func (in *fastInbox) close() {
	if in != nil && in.sub != nil {
		_ = in.sub.Unsubscribe()
	}
}

// fastBatch sends msgs as one fast-ingest batch in gap-fail mode and
// returns how many of them, from the first, the stream stored. An error
// wrapping txbox.ErrBrokerUnavailable means the outcome is unknown (the
// connection or the deadline); any other error, or stored < len(msgs),
// means the stream stored exactly that prefix and nothing after it.
func (p *Publisher) fastBatch(ctx context.Context, msgs []*nats.Msg) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, txbox.Unavailable(fmt.Errorf("nats: publish: %w", err))
	}
	select {
	case p.batches <- struct{}{}:
		defer func() { <-p.batches }()
	case <-ctx.Done():
		return 0, txbox.Unavailable(fmt.Errorf("nats: waiting for a free batch slot: %w", ctx.Err()))
	}
	if st := p.nc.Status(); st != nats.CONNECTED {
		return 0, txbox.Unavailable(fmt.Errorf("nats: publish: connection is %s", st))
	}
	id := newBatchID()
	answer := p.fastIn.register(id)
	defer p.fastIn.forget(id)
	base := p.fastIn.prefix + "." + id + "." + strconv.Itoa(fastFlow) + ".fail."
	last := len(msgs) - 1
	for j, m := range msgs {
		op := fastOpAppend
		switch {
		case j == last:
			op = fastOpCommit
		case j == 0:
			op = fastOpStart
		}
		m.Reply = base + strconv.Itoa(j+1) + "." + strconv.Itoa(op) + ".$FI"
		if err := p.nc.PublishMsg(m); err != nil {
			// The stream may hold a prefix of what was sent, which a
			// resend one by one deduplicates; nothing after it.
			return 0, batchSendErr(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, p.ackTimeout)
	defer cancel()
	select {
	case a := <-answer:
		if a.stored < 0 {
			return 0, fmt.Errorf("nats: fast batch on %q refused: %w", msgs[0].Subject, a.err)
		}
		if a.stored > len(msgs) {
			return 0, txbox.Unavailable(fmt.Errorf("nats: fast batch on %q: the stream counts %d messages, %d were sent", msgs[0].Subject, a.stored, len(msgs)))
		}
		return a.stored, nil
	case <-wctx.Done():
		return 0, txbox.Unavailable(fmt.Errorf("nats: waiting for the PubAck of a fast batch on %q: %w", msgs[0].Subject, wctx.Err()))
	}
}
