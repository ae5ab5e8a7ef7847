package faults

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox/internal/testenv"
)

// NATS is a nats-server of the run's own with JetStream, and the stream the
// relays create.
type NATS struct {
	Server   *testenv.NATSServer
	NProxy   *testenv.Proxy
	Stream   string
	Subjects string

	mu sync.Mutex
	// deleted holds the messages of streams the stream-recreated fault
	// deleted, for the checker (Read).
	deleted []streamMsg
	// stuck, when set, is told the consumer name whose durable did not
	// catch up (World.dumpConsumers).
	stuck func(inbox string)
	// CatchUp bounds the stream-recreated fault's wait for the consumers
	// to drain the old stream; 0: 5 minutes.
	CatchUp time.Duration
}

// NewNATS starts the server and its proxy, stopped when t ends.
func NewNATS(t *testing.T) *NATS {
	b := &NATS{Server: testenv.StartNATS(t), Stream: "FAULTS", Subjects: "faults.>"}
	b.NProxy = testenv.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", b.Server.Port))
	return b
}

func (b *NATS) Kind() string          { return "nats" }
func (b *NATS) URL() string           { return "nats://" + b.NProxy.Addr() }
func (b *NATS) Proxy() *testenv.Proxy { return b.NProxy }
func (b *NATS) Stop()                 { b.Server.Kill() }
func (b *NATS) Start()                { b.Server.Start() }
func (b *NATS) Minimums() Minimums {
	return Minimums{RestartBroker: 2, StreamFull: 1, StreamRecreated: 1}
}

func (b *NATS) RelayArgs() []string {
	return []string{"--nats-stream", b.Stream, "--nats-subjects", b.Subjects, "--nats-create-stream"}
}

func (b *NATS) ConsumerEnv() []string { return []string{"FAULTS_STREAM=" + b.Stream} }

func (b *NATS) Fault(ctx context.Context, f Fault) (string, error) {
	switch f.Kind {
	case StreamFull:
		return b.streamFull(ctx)
	case StreamRecreated:
		return b.recreateStream(ctx)
	}
	return "", errNotHere
}

// jetStream connects to the world's server (not through its proxy: the
// harness's own reads and faults are not faulted); close ends it.
func (b *NATS) jetStream() (js jetstream.JetStream, close func(), err error) {
	nc, err := nats.Connect(b.Server.URL)
	if err != nil {
		return nil, nil, err
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// stream is jetStream and the world's stream with its current info.
func (b *NATS) stream(ctx context.Context) (jetstream.JetStream, jetstream.Stream, *jetstream.StreamInfo, func(), error) {
	js, closeJS, err := b.jetStream()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	st, err := js.Stream(ctx, b.Stream)
	if err != nil {
		closeJS()
		return nil, nil, nil, nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		closeJS()
		return nil, nil, nil, nil, err
	}
	return js, st, info, closeJS, nil
}

// streamEdit is the stream with its settings changed: before holds the
// old ones, to restore, and cfg the new.
type streamEdit struct {
	js      jetstream.JetStream
	st      jetstream.Stream
	before  *jetstream.StreamInfo
	cfg     jetstream.StreamConfig
	closeJS func()
}

// editStream changes the stream's settings as edit says; what names the
// change in an error. The caller restores them and calls closeJS.
func (b *NATS) editStream(ctx context.Context, what string, edit func(*jetstream.StreamConfig, *jetstream.StreamInfo)) (*streamEdit, error) {
	js, st, before, closeJS, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	e := &streamEdit{js: js, st: st, before: before, cfg: before.Config, closeJS: closeJS}
	edit(&e.cfg, before)
	if _, err := js.UpdateStream(ctx, e.cfg); err != nil {
		closeJS()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return e, nil
}

func (b *NATS) Diagnose(ctx context.Context) string {
	js, closeJS, err := b.jetStream()
	if err != nil {
		return err.Error()
	}
	defer closeJS()
	var out []string
	for _, c := range consumerNames() {
		cons, err := js.Consumer(ctx, b.Stream, c.Inbox)
		if err != nil {
			out = append(out, fmt.Sprintf("durable %s: %v", c.Inbox, err))
			continue
		}
		i, err := cons.Info(ctx)
		if err != nil {
			out = append(out, fmt.Sprintf("durable %s: %v", c.Inbox, err))
			continue
		}
		out = append(out, fmt.Sprintf("durable %s: %d pending, %d unacknowledged, %d redelivered, %d waiting pulls",
			c.Inbox, i.NumPending, i.NumAckPending, i.NumRedelivered, i.NumWaiting))
	}
	return strings.Join(out, "; ")
}

// Read is the stream's messages, after those of the streams the
// stream-recreated fault deleted: what they held was delivered, and their
// order counts.
func (b *NATS) Read(ctx context.Context) ([]streamMsg, error) {
	b.mu.Lock()
	out := slices.Clone(b.deleted)
	b.mu.Unlock()
	cur, err := b.read(ctx)
	return append(out, cur...), err
}

func (b *NATS) read(ctx context.Context) ([]streamMsg, error) {
	_, st, info, closeJS, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	defer closeJS()
	total := info.State.Msgs
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []streamMsg
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, streamMsg{id: m.Headers().Get("ce-id")})
			n++
		}
		if n == 0 {
			return out, fmt.Errorf("stream read stalled at %d of %d", len(out), total)
		}
	}
	return out, nil
}

// streamFull makes the stream refuse every publish for a while: at its
// message limit, discarding new messages. The limit is enforced when it is
// set, whatever the discard policy: set below the stream's count it would
// delete the oldest messages, and the relays' publishes race with setting
// it, so a limit set at the count may lose a delivered event. So the limit
// leaves a margin over the count, the fault waits for the relays to fill
// it, and it fails if the stream's first message changed.
func (b *NATS) streamFull(ctx context.Context) (string, error) {
	e, err := b.editStream(ctx, "make the stream full", func(full *jetstream.StreamConfig, before *jetstream.StreamInfo) {
		full.MaxMsgs, full.Discard = int64(before.State.Msgs)+200, jetstream.DiscardNew
	})
	if err != nil {
		return "", err
	}
	defer e.closeJS()
	js, st, before, orig, full := e.js, e.st, e.before, e.before.Config, e.cfg
	start := time.Now()
	var filled time.Duration
	for time.Since(start) < 10*time.Second {
		info, err := st.Info(ctx)
		if err == nil && int64(info.State.Msgs) >= full.MaxMsgs {
			filled = time.Since(start)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	after, ierr := st.Info(ctx)
	if _, err := js.UpdateStream(ctx, orig); err != nil {
		return "", fmt.Errorf("restore the stream: %w", err)
	}
	if ierr != nil {
		return "", ierr
	}
	// An empty stream (just made again) has nothing to lose.
	if before.State.Msgs > 0 && after.State.FirstSeq != before.State.FirstSeq {
		return "", fmt.Errorf("the limit deleted messages: first sequence %d, was %d", after.State.FirstSeq, before.State.FirstSeq)
	}
	return fmt.Sprintf("limit %d messages, full after %v, then 3s", full.MaxMsgs, filled.Round(10*time.Millisecond)), nil
}

// recreateStream deletes the stream under the running relays and makes it
// again, as an operator re-creating it with other settings would. First
// the stream stops capturing the subjects (the relays' publishes then fail
// with no stream for the subject: an outage), the consumers catch up with
// what it holds, and its messages are kept for the checker (they are
// delivered: the deletion, not txbox, takes them out of the stream); then
// it is deleted, the relays find no stream for a few seconds, and it is
// made again with its old settings, empty. The consumers' durable
// consumers went with it and are made again by the subscribers.
func (b *NATS) recreateStream(ctx context.Context) (string, error) {
	e, err := b.editStream(ctx, "stop the stream capturing its subjects", func(parked *jetstream.StreamConfig, _ *jetstream.StreamInfo) {
		parked.Subjects = []string{"faults-parked-" + b.Stream}
	})
	if err != nil {
		return "", err
	}
	defer e.closeJS()
	js, orig := e.js, e.before.Config
	restore := func() error {
		_, err := js.CreateOrUpdateStream(ctx, orig)
		return err
	}
	caught, err := b.caughtUp(ctx, js, cmp.Or(b.CatchUp, 5*time.Minute))
	if err != nil {
		_ = restore()
		return "", err
	}
	kept, err := b.read(ctx)
	if err != nil {
		_ = restore()
		return "", fmt.Errorf("keep the stream's messages: %w", err)
	}
	b.mu.Lock()
	b.deleted = append(b.deleted, kept...)
	b.mu.Unlock()
	if err := js.DeleteStream(ctx, b.Stream); err != nil {
		_ = restore()
		return "", fmt.Errorf("delete the stream: %w", err)
	}
	time.Sleep(3 * time.Second)
	if err := restore(); err != nil {
		return "", fmt.Errorf("make the stream again: %w", err)
	}
	return fmt.Sprintf("%d messages deleted with it (consumers caught up in %v)", len(kept), caught.Round(10*time.Millisecond)), nil
}

// caughtUp waits until every consumer name's durable consumer has nothing
// pending or unacknowledged, and returns how long that took.
func (b *NATS) caughtUp(ctx context.Context, js jetstream.JetStream, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for _, c := range consumerNames() {
		for {
			cons, err := js.Consumer(ctx, b.Stream, c.Inbox)
			if err == nil {
				info, err := cons.Info(ctx)
				if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
					break
				}
			}
			if time.Since(start) > limit {
				state := "no info"
				if cons != nil {
					if info, err := cons.Info(ctx); err == nil {
						state = fmt.Sprintf("%d pending, %d unacknowledged, %d redelivered, %d pulls waiting, last delivered stream seq %d, ack floor %d",
							info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, info.Delivered.Stream, info.AckFloor.Stream)
					}
				}
				if b.stuck != nil {
					b.stuck(c.Inbox)
				}
				return 0, fmt.Errorf("the consumers (%s) did not catch up with the stream within %v (%s; their goroutines are in their output)", c.Inbox, limit, state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return time.Since(start), nil
}
