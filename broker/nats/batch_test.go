package natsbroker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/testenv"
)

// TestConformanceFastBatch runs brokertest on a nats-server 2.15 of the
// test's own (built from the module: the service and the Debian package are
// 2.9, without batch publish). The publisher must create the stream with
// fast-ingest batches allowed, use them and declare PipelinesPerKey, so the
// Pipelined cases run.
func TestConformanceFastBatch(t *testing.T) {
	srv := testenv.StartNATSBinary(t, testenv.NATSModuleBinary(t))
	waitJetStream(t, srv.URL)
	conformance(t, srv.URL, func(*testing.T) { srv.Kill() }, func(*testing.T) { srv.Start() }, "fast")
}

// TestConformanceAtomicBatch is the same on a stream that allows atomic
// batches only (allow_atomic, as on 2.12 and 2.13).
func TestConformanceAtomicBatch(t *testing.T) {
	srv := testenv.StartNATSBinary(t, testenv.NATSModuleBinary(t))
	waitJetStream(t, srv.URL)
	conformance(t, srv.URL, func(*testing.T) { srv.Kill() }, func(*testing.T) { srv.Start() }, "atomic")
}

// jetStreamAt connects to the server at url for the rest of the test and
// returns its JetStream context with a context ending after d.
func jetStreamAt(t *testing.T, url string, d time.Duration) (jetstream.JetStream, context.Context) {
	t.Helper()
	js := testenv.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return js, ctx
}

// streamOf looks the stream name up, failing the test when it cannot. Its
// CachedInfo is the stream's configuration and state as of the lookup.
func streamOf(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// consumerInfo reads the durable consumer's state, failing the test when
// it cannot.
func consumerInfo(ctx context.Context, t *testing.T, js jetstream.JetStream, stream, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// preCreate makes a stream on the server at url for one test.
func preCreate(t *testing.T, url string, cfg jetstream.StreamConfig) {
	t.Helper()
	js, ctx := jetStreamAt(t, url, 10*time.Second)
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// batchModes runs f for each batch protocol on a fresh 2.15 server, with a
// stream that allows only that one.
func batchModes(t *testing.T, f func(t *testing.T, url, stream, prefix, mode string)) {
	url := server215(t)
	for _, mode := range []string{"fast", "atomic"} {
		t.Run(mode, func(t *testing.T) {
			prefix := adaptertest.Unique("ab." + mode[:1])
			stream := streamName(prefix)
			preCreate(t, url, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, MaxMsgSize: 64 << 10,
				AllowBatchPublish: mode == "fast", AllowAtomicPublish: mode == "atomic"})
			f(t, url, stream, prefix, mode)
		})
	}
}

// afterFailure runs the armed hook once, after a Publish call in which a
// message failed: the harness lifts the limit that made it fail, so the
// failure happens once, as FailPublishAfter promises.
type afterFailure struct {
	*natsbroker.Publisher
	hook *atomic.Pointer[func()]
}

func (a *afterFailure) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := a.Publisher.Publish(ctx, msgs)
	for _, err := range errs {
		if err != nil {
			if f := a.hook.Swap(nil); f != nil {
				(*f)()
			}
			break
		}
	}
	return errs
}

// limitStream lets n more messages into the stream and refuses the next
// ones (max_msgs with discard new: "maximum messages exceeded", which the
// stream may accept later, so retryable), until a Publish call saw a
// failure; then the limit goes.
func limitStream(t *testing.T, nc *nats.Conn, stream string, n int, hook *atomic.Pointer[func()]) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info := streamOf(ctx, t, js, stream).CachedInfo()
	orig := info.Config
	limited := orig
	limited.MaxMsgs = int64(info.State.Msgs) + int64(n)
	limited.Discard = jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	lift := func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.UpdateStream(ctx, orig); err != nil {
			t.Error(fmt.Errorf("lift the stream limit: %w", err))
		}
	}
	hook.Store(&lift)
	t.Cleanup(lift)
}

// server215 starts a nats-server 2.15 of the test's own.
func server215(t *testing.T) string {
	t.Helper()
	srv := testenv.StartNATSBinary(t, testenv.NATSModuleBinary(t))
	waitJetStream(t, srv.URL)
	return srv.URL
}

// storedIDs reads every message on subject from the stream, in stream
// order, and returns their Nats-Msg-Id and whether any carried a batch
// header.
func storedIDs(t *testing.T, url, stream, subject string) (ids []string, batched int) {
	t.Helper()
	js, ctx := jetStreamAt(t, url, 20*time.Second)
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for left := info.NumPending; left > 0; {
		b, err := c.FetchNoWait(int(min(left, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range b.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			if m.Headers().Get("Nats-Batch-Id") != "" {
				batched++
			}
			got++
		}
		if got == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		left -= uint64(got)
	}
	return ids, batched
}

func eventIDs(msgs []broker.Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Event.ID
	}
	return ids
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: message %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

// A run of one key goes as batches of at most 1,000 (three here), stored in
// order; a run republished whole, which an atomic batch refuses because the
// stream holds those event ids (a fast batch skips them), is deduplicated,
// not stored twice.
func TestBatchRunAndRepublish(t *testing.T) {
	batchModes(t, func(t *testing.T, url, stream, prefix, mode string) {
		p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
		if got := p.BatchMode(); got != mode {
			t.Fatalf("batch mode %q, want %q", got, mode)
		}
		topic := prefix + ".Order.Created"
		msgs := adaptertest.Msgs(topic, "hot", 2500) // three batches: 1000, 1000, 500
		msgs = append(msgs, adaptertest.Msg(topic, "other", 0))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adaptertest.PublishOK(ctx, t, p, msgs)
		if c := p.Committed(); c != 3 {
			t.Fatalf("%d batches stored whole, want 3", c)
		}
		ids, batched := storedIDs(t, url, stream, topic)
		if mode == "atomic" && batched != 2500 {
			t.Fatalf("%d stored messages carry a batch id, want the 2500 of the run", batched)
		}
		// Per key order: the run's events in order; the single one anywhere.
		var hot []string
		for _, id := range ids {
			if id != msgs[2500].Event.ID {
				hot = append(hot, id)
			}
		}
		sameIDs(t, "stored run", hot, eventIDs(msgs[:2500]))

		for i, err := range p.Publish(ctx, msgs[:1200]) {
			if err != nil {
				t.Fatalf("republish, message %d: %v", i, err)
			}
		}
		if ids, _ := storedIDs(t, url, stream, topic); len(ids) != 2501 {
			t.Fatalf("after the republish the stream holds %d messages, want 2501", len(ids))
		}
	})
}

// A message over the stream's max_msg_size in the middle of a run ends a
// fast batch after the prefix before it and makes the stream refuse a whole
// atomic batch; the rest is sent again one at a time, so that message fails
// permanently and the others of the key are stored, in order.
func TestBatchPermanentInRun(t *testing.T) {
	batchModes(t, func(t *testing.T, url, stream, prefix, mode string) {
		p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
		topic := prefix + ".Order.Created"
		var msgs []broker.Message
		for i := range 20 {
			m := adaptertest.Msg(topic, "hot", i)
			if i == 7 {
				m.Event.Payload = []byte(fmt.Sprintf(`{"big":%q}`, strings.Repeat("x", 70<<10)))
			}
			msgs = append(msgs, m)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs := p.Publish(ctx, msgs)
		for i, err := range errs {
			switch {
			case i == 7 && !errors.Is(err, txbox.ErrPermanent):
				t.Fatalf("the oversize message: %v, want permanent", err)
			case i != 7 && err != nil:
				t.Fatalf("message %d: %v", i, err)
			}
		}
		t.Logf("oversize: %v", errs[7])
		want := append(eventIDs(msgs[:7]), eventIDs(msgs[8:])...)
		ids, _ := storedIDs(t, url, stream, topic)
		sameIDs(t, "stored", ids, want)
	})
}

// On a stream that allows neither batch protocol the publisher does not
// declare pipelining; nor with NoBatchPublish.
func TestNoAtomicBatchWithoutStreamSetting(t *testing.T) {
	url := server215(t)
	prefix := adaptertest.Unique("ab.n")
	stream := streamName(prefix)
	js, ctx := jetStreamAt(t, url, 10*time.Second)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}}); err != nil {
		t.Fatal(err)
	}
	if adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream}).PipelinesPerKey() {
		t.Fatal("PipelinesPerKey is true on a stream without allow_atomic")
	}
	if adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: adaptertest.Unique("AB_X"), Subjects: []string{adaptertest.Unique("abx.") + ".>"}, CreateStream: true, NoBatchPublish: true}).PipelinesPerKey() {
		t.Fatal("PipelinesPerKey is true with NoBatchPublish")
	}
}

// A message that fits max_payload on its own but not with the batch
// headers makes the client refuse the batch, which is not an outage: the
// run is sent one message at a time and every message is confirmed.
func TestAtomicBatchHeadersOverMaxPayload(t *testing.T) {
	url := server215(t)
	prefix := adaptertest.Unique("ab.h")
	stream := streamName(prefix)
	preCreate(t, url, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, AllowAtomicPublish: true})
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
	if p.BatchMode() != "atomic" {
		t.Fatalf("batch mode %q, want atomic", p.BatchMode())
	}
	topic := prefix + ".Order.Created"
	msgs := []broker.Message{adaptertest.Msg(topic, "hot", 0), adaptertest.Msg(topic, "hot", 1), adaptertest.Msg(topic, "hot", 2)}
	big := msgs[1]
	big.Event.Payload = []byte(`""`)
	pad := p.MaxPayload() - p.EncodedSize(big) - 10 // 10 bytes to spare, fewer than the batch headers take
	big.Event.Payload = []byte(`"` + strings.Repeat("x", pad) + `"`)
	msgs[1] = big
	if size := p.EncodedSize(big); size > p.MaxPayload() || size < p.MaxPayload()-20 {
		t.Fatalf("test message is %d bytes, want just under %d", size, p.MaxPayload())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adaptertest.PublishOK(ctx, t, p, msgs)
	ids, _ := storedIDs(t, url, stream, topic)
	sameIDs(t, "stored", ids, eventIDs(msgs))
}

// A run whose first part the stream already holds (a relay that crashed
// between the PubAcks and the mark, or whose batch timed out after the
// stream stored a prefix) is confirmed whole and stored once, in order.
func TestBatchRepublishedPrefix(t *testing.T) {
	batchModes(t, func(t *testing.T, url, stream, prefix, mode string) {
		p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
		topic := prefix + ".Order.Created"
		msgs := adaptertest.Msgs(topic, "hot", 200)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, part := range [][]broker.Message{msgs[:100], msgs} {
			adaptertest.PublishOK(ctx, t, p, part)
		}
		// A fast batch skips the ids the stream holds; an atomic batch
		// with one is refused whole and sent again one by one.
		want := map[string]uint64{"fast": 2, "atomic": 1}[mode]
		if c := p.Committed(); c != want {
			t.Fatalf("%d batches stored whole, want %d", c, want)
		}
		ids, _ := storedIDs(t, url, stream, topic)
		sameIDs(t, "stored", ids, eventIDs(msgs))
	})
}

// Several publishers (relays) sending runs of their own keys into one
// stream at once: every message confirmed, each key's messages stored in
// order.
func TestBatchConcurrentPublishers(t *testing.T) {
	batchModes(t, func(t *testing.T, url, stream, prefix, mode string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const pubs, calls, run = 4, 3, 600
		want := make([][]string, pubs)
		var wg sync.WaitGroup
		for g := range pubs {
			p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
			topic := fmt.Sprintf("%s.g%d", prefix, g)
			var msgs []broker.Message
			for i := range calls * run {
				msgs = append(msgs, adaptertest.Msg(topic, fmt.Sprint("k", g), i))
			}
			want[g] = eventIDs(msgs)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range calls {
					for i, err := range p.Publish(ctx, msgs[c*run:(c+1)*run]) {
						if err != nil {
							t.Errorf("publisher %d call %d message %d: %v", g, c, i, err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		for g := range pubs {
			ids, _ := storedIDs(t, url, stream, fmt.Sprintf("%s.g%d", prefix, g))
			sameIDs(t, fmt.Sprint("publisher ", g), ids, want[g])
		}
	})
}

// After a reconnect that lands on a server without batch publish (a
// rolling downgrade; 2.9 here), runs go one message at a time: a batch
// there would be plain publishes, which promise nothing after a failure.
func TestBatchServerDowngradedUnderneath(t *testing.T) {
	if _, err := testenv.NATSBinary(); err != nil {
		testenv.Missing(t, err.Error())
	}
	newSrv := testenv.StartNATSBinary(t, testenv.NATSModuleBinary(t))
	waitJetStream(t, newSrv.URL)
	oldSrv := testenv.StartNATS(t) // the packaged 2.9
	waitJetStream(t, oldSrv.URL)
	prefix := adaptertest.Unique("ab.d")
	stream := streamName(prefix)
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}}
	preCreate(t, oldSrv.URL, cfg)
	url, proxy := testenv.ProxyURL(t, newSrv.URL)
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream, Subjects: cfg.Subjects, CreateStream: true,
		Connection: natsbroker.Connection{ReconnectWait: 50 * time.Millisecond}, AckTimeout: 2 * time.Second})
	if p.BatchMode() != "fast" {
		t.Fatalf("batch mode %q on 2.15, want fast", p.BatchMode())
	}
	proxy.SetTarget(strings.TrimPrefix(oldSrv.URL, "nats://"))
	proxy.Cut()
	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for p.Conn().Status() != nats.CONNECTED || !strings.HasPrefix(p.Conn().ConnectedServerVersion(), "2.9") {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect to the 2.9 server: %s, version %s", p.Conn().Status(), p.Conn().ConnectedServerVersion())
		}
		time.Sleep(20 * time.Millisecond)
	}
	topic := prefix + ".Order.Created"
	msgs := adaptertest.Msgs(topic, "hot", 300)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adaptertest.PublishOK(ctx, t, p, msgs)
	if c := p.Committed(); c != 0 {
		t.Fatalf("%d batches on a 2.9 server", c)
	}
	ids, _ := storedIDs(t, oldSrv.URL, stream, topic)
	sameIDs(t, "stored on 2.9", ids, eventIDs(msgs))
}
