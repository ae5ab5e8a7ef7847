package natsbroker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/testenv"
)

// sharedStream creates a stream on the shared server for one test, and
// deletes it afterwards. It returns the server URL and the subject prefix.
func sharedStream(t *testing.T, cfg jetstream.StreamConfig) (string, string) {
	t.Helper()
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	prefix := adaptertest.Unique("txboxtest.s")
	cfg.Name = streamName(prefix)
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{prefix + ".>"}
	}
	js := testenv.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, cfg.Name)
	})
	return url, prefix
}

func streamName(prefix string) string {
	return strings.ReplaceAll(strings.ToUpper(prefix), ".", "_")
}

// inMemory is the stream most tests need: nothing outlives the server.
var inMemory = jetstream.StreamConfig{Storage: jetstream.MemoryStorage}

// sharedPublisher is a publisher, with opts, to a stream sharedStream made
// with cfg.
func sharedPublisher(t *testing.T, cfg jetstream.StreamConfig, opts natsbroker.Options) (url, prefix string, p *natsbroker.Publisher) {
	t.Helper()
	url, prefix = sharedStream(t, cfg)
	opts.Stream = streamName(prefix)
	return url, prefix, adaptertest.Open(t, natsbroker.Open, url, opts)
}

// TestConformance runs brokertest against a nats-server process of this
// test's own, so the broker-down case can kill and restart it. Without the
// binary it falls back locally to the shared server and that case is
// skipped; under TXBOX_REQUIRE_SERVICES=1 the missing binary fails the test.
func TestConformance(t *testing.T) {
	srv := adaptertest.OwnOrShared(t, "nats-server", testenv.NATSBinary, "TXBOX_TEST_NATS", func(t *testing.T) adaptertest.Server {
		srv := testenv.StartNATS(t)
		waitJetStream(t, srv.URL)
		return adaptertest.Server{URL: srv.URL, Stop: func(*testing.T) { srv.Kill() }, Start: func(*testing.T) { srv.Start() }}
	})
	conformance(t, srv.URL, srv.Stop, srv.Start, "")
}

// conformance runs brokertest on the server at url. mode is the batch
// protocol the publisher must find ("fast", "atomic") or "" for none;
// with one it declares PipelinesPerKey, and the harness injects a retryable
// failure in the middle of a run (FailPublishAfter). For "atomic" the
// stream is made beforehand with allow_atomic only; otherwise the
// publisher creates it with what the server has.
func conformance(t *testing.T, url string, stop, start func(*testing.T), mode string) {
	pipelined := mode != ""
	prefix := adaptertest.Unique("bt.r")
	stream := streamName(prefix)
	if mode == "atomic" {
		preCreate(t, url, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true})
	}
	opts := natsbroker.Options{
		Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true,
		Connection: natsbroker.Connection{ReconnectWait: 100 * time.Millisecond, Logger: adaptertest.Quiet},
	}
	// Made once here so every case's publisher finds it.
	setup := adaptertest.Open(t, natsbroker.Open, url, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if js, err := jetstream.New(setup.Conn()); err == nil {
			_ = js.DeleteStream(ctx, stream)
		}
	})
	var n atomic.Int64
	const ackWait = time.Second
	// failed is run once after a Publish that had a failure, when armed by
	// FailPublishAfter.
	var failed atomic.Pointer[func()]
	var failAfter func(t *testing.T, n int)
	if pipelined {
		failAfter = func(t *testing.T, n int) { limitStream(t, setup.Conn(), stream, n, &failed) }
	}
	brokertest.Run(t, brokertest.Harness{
		FailPublishAfter: failAfter,
		// One stream keeps publish order per connection, persists, drops a
		// repeated Nats-Msg-Id inside its duplicate window, and redelivers
		// what a consumer does not acknowledge.
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			return brokertest.Capabilities{OrderPerKey: true, Persistent: true, NativeDedupe: true, Redelivery: true,
				MaxPayload: p.(interface{ MaxPayload() int }).MaxPayload(), PipelinesPerKey: pipelined}
		},
		NewPublisher: func(ctx context.Context, t *testing.T) broker.Publisher {
			p, err := natsbroker.Open(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.BatchMode(); got != mode {
				t.Fatalf("the publisher uses batch mode %q, want %q", got, mode)
			}
			if pipelined {
				return &afterFailure{Publisher: p, hook: &failed}
			}
			return p
		},
		NewSubscriber: adaptertest.NewSubscriber(natsbroker.OpenSubscriber, url, func(group, topic string) natsbroker.SubscriberOptions {
			return natsbroker.SubscriberOptions{Stream: stream, Durable: group, FilterSubjects: []string{topic}, AckWait: ackWait}
		}),
		Topic: func(*testing.T) string { return fmt.Sprintf("%s.t%d.Order.Created", prefix, n.Add(1)) },
		InvalidTopics: []string{
			"", prefix + ".a b", prefix + ".*", prefix + ".>", prefix + "..x", prefix + ".x.", ".x",
		},
		// A valid subject no stream captures, until a stream for it is made.
		MissingDestination: func(t *testing.T) (string, func(*testing.T)) {
			subject := fmt.Sprintf("%s.Order.Created", adaptertest.Unique(fmt.Sprintf("btmiss%d.", n.Add(1))))
			return subject, func(t *testing.T) {
				js, err := jetstream.New(setup.Conn())
				if err != nil {
					t.Fatal(err)
				}
				name := streamName(subject)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = js.DeleteStream(ctx, name)
				})
			}
		},
		// Every topic is a subject of the one stream: deleted and created
		// again with its config, as an operator re-creating it would.
		RecreateDestination: func(t *testing.T, _ string) {
			js, err := jetstream.New(setup.Conn())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			info := streamOf(ctx, t, js, stream).CachedInfo()
			if err := js.DeleteStream(ctx, stream); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, info.Config); err != nil {
				t.Fatalf("create stream %s again: %v", stream, err)
			}
		},
		AckWait:     ackWait,
		StopBroker:  stop,
		StartBroker: start,
		PublishRaw: func(ctx context.Context, t *testing.T, topic string, headers map[string]string, body []byte) {
			js, err := jetstream.New(setup.Conn())
			if err != nil {
				t.Fatal(err)
			}
			m := &nats.Msg{Subject: topic, Header: nats.Header{}, Data: body}
			for k, v := range headers {
				m.Header[k] = []string{v}
			}
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestPublishOrderAcrossWindow: a window far smaller than the batch, and
// concurrent calls sharing it, still confirm everything, in order, without
// deadlock.
func TestPublishOrderAcrossWindow(t *testing.T) {
	url, prefix, p := sharedPublisher(t, inMemory, natsbroker.Options{MaxInFlight: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adaptertest.PublishConcurrently(ctx, t, p, 4, 150, func(g int) string { return fmt.Sprintf("%s.g%d", prefix, g) })
	// Stream order per subject is publish order.
	s := adaptertest.Open(t, natsbroker.OpenSubscriber, url, natsbroker.SubscriberOptions{Stream: streamName(prefix), Durable: "order", FilterSubjects: []string{prefix + ".g2"}})
	want := 0
	adaptertest.Each(ctx, t, s, 150, func(_ broker.Delivery, e txbox.Event) {
		if got := string(e.Payload); got != fmt.Sprintf(`{"n":%d}`, want) {
			t.Fatalf("message %d has payload %s", want, got)
		}
		want++
	})
}

// TestDuplicatesCounted: a republished event is confirmed and counted, and
// not stored twice.
func TestDuplicatesCounted(t *testing.T) {
	_, prefix, p := sharedPublisher(t, inMemory, natsbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := adaptertest.Msg(prefix+".x", "k", 0)
	for i := range 3 {
		if err := p.Publish(ctx, []broker.Message{m})[0]; err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if d := p.Duplicates(); d != 2 {
		t.Errorf("Duplicates() = %d, want 2", d)
	}
}

// TestPermanentErrorsNameTheProblem: the last_error an operator reads says
// which subject, header or size was wrong.
func TestPermanentErrorsNameTheProblem(t *testing.T) {
	_, prefix, p := sharedPublisher(t, jetstream.StreamConfig{Storage: jetstream.MemoryStorage, MaxMsgSize: 2048}, natsbroker.Options{})
	if got := p.MaxPayload(); got != 2048 {
		t.Errorf("MaxPayload = %d, want the stream's 2048", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := adaptertest.Msg(prefix+".big", "k", 1)
	big.Event.Payload = []byte(`"` + strings.Repeat("x", 3000) + `"`)
	badHeader := adaptertest.Msg(prefix+".h", "k", 2)
	badHeader.Event.Headers = map[string]string{"traceparent": "00-abc\r\nInjected: yes"}
	padded := adaptertest.Msg(prefix+".h", " k", 3)
	msgs := []broker.Message{big, badHeader, padded, adaptertest.Msg(prefix+".ok", "k", 4)}
	adaptertest.Verdicts(t, p.Publish(ctx, msgs), []string{"max_msg_size", "line break", "whitespace", ""})
}

// TestOpenErrors: configuration mistakes and an unreachable server are told
// apart, and a password never shows.
func TestOpenErrors(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := natsbroker.Open(ctx, url, natsbroker.Options{Stream: adaptertest.Unique("MISSING"), Connection: natsbroker.Connection{Logger: adaptertest.Quiet}})
	if !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("missing stream: %v, want a config error", err)
	}
	_, err = natsbroker.OpenSubscriber(ctx, url, natsbroker.SubscriberOptions{Stream: adaptertest.Unique("MISSING"), Durable: "d", Connection: natsbroker.Connection{Logger: adaptertest.Quiet}})
	if !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("subscriber on missing stream: %v, want a config error", err)
	}
	_, err = natsbroker.OpenSubscriber(ctx, url, natsbroker.SubscriberOptions{Connection: natsbroker.Connection{Logger: adaptertest.Quiet}})
	if !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("subscriber without durable: %v, want a config error", err)
	}

	// A closed loopback port: nothing listens there.
	secretURL := "nats://alice:s3cr3t-pw@127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	_, err = natsbroker.Open(ctx, secretURL, natsbroker.Options{Connection: natsbroker.Connection{ConnectTimeout: time.Second, Logger: adaptertest.Quiet}})
	if !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("server down: %v, want ErrBrokerUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("error shows the password: %v", err)
	}
}

// dialer counts the connections nats.go makes through it.
type dialer struct{ n atomic.Int32 }

func (d *dialer) Dial(network, address string) (net.Conn, error) {
	d.n.Add(1)
	return net.Dial(network, address)
}

// TestClientOptions: nats.go's own options apply after txbox's, on both
// sides: a dialer of the caller's makes the connections, and a client name
// of the caller's replaces txbox's.
func TestClientOptions(t *testing.T) {
	url, prefix := sharedStream(t, inMemory)
	var d dialer
	own := []nats.Option{nats.SetCustomDialer(&d), nats.Name("billing-relay")}
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: streamName(prefix), Connection: natsbroker.Connection{ClientOptions: own}})
	if name := p.Conn().Opts.Name; name != "billing-relay" {
		t.Errorf("client name %q, want the caller's", name)
	}
	adaptertest.Open(t, natsbroker.OpenSubscriber, url, natsbroker.SubscriberOptions{Stream: streamName(prefix), Durable: "d", Connection: natsbroker.Connection{ClientOptions: own}})
	if n := d.n.Load(); n != 2 {
		t.Errorf("%d connections through the caller's dialer, want 2", n)
	}
}

func TestValidateSubject(t *testing.T) {
	for _, ok := range []string{"outbox.Order.Created", "a", "a-b_c.D$1", "orders.ünïcode"} {
		if err := natsbroker.ValidateSubject(ok); err != nil {
			t.Errorf("ValidateSubject(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a\tb", "a\nb", "a.*", "a.>", "a*b", ".a", "a.", "a..b", "a\x00b", "a\x7fb"} {
		if err := natsbroker.ValidateSubject(bad); err == nil {
			t.Errorf("ValidateSubject(%q) = nil, want an error", bad)
		}
	}
}

// TestSubscriberOnSharedServer: deliveries expose JetStream's metadata and
// the consumer's position survives reopening it.
func TestSubscriberOnSharedServer(t *testing.T) {
	url, prefix, p := sharedPublisher(t, inMemory, natsbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	m0, m1 := adaptertest.Msg(prefix+".a", "k", 0), adaptertest.Msg(prefix+".a", "k", 1)
	adaptertest.PublishOK(ctx, t, p, []broker.Message{m0, m1})
	sopts := natsbroker.SubscriberOptions{Stream: streamName(prefix), Durable: "svc", AckWait: time.Second, Connection: natsbroker.Connection{Logger: adaptertest.Quiet}}
	s, err := natsbroker.OpenSubscriber(ctx, url, sopts)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	raw := ds[0].Raw()
	if raw.ID != m0.Event.ID || raw.Headers["ce-id"] != m0.Event.ID || raw.Headers["content-type"] != "application/json" {
		t.Errorf("Raw() = %+v", raw)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Ack(ctx); err == nil || errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("second Ack = %v, want a caller error", err)
	}
	s.Close()

	// Reopened, the durable consumer resumes after the acked message.
	s, err = natsbroker.OpenSubscriber(ctx, url, sopts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, err = s.Receive(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		t.Fatalf("after reopening: %d deliveries, want 1", len(ds))
	}
	if e, err := ds[0].Event(); err != nil || e.ID != m1.Event.ID {
		t.Fatalf("after reopening: %v, %v; want %s", e.ID, err, m1.Event.ID)
	}
	if a := ds[0].Attempt(); a != 1 {
		t.Errorf("Attempt() = %d, want 1", a)
	}
}

// TestReceiveWaitsForFirstMessage: a Receive that has to wait (a long pull
// with heartbeats) returns as soon as one message exists, without waiting to
// fill its batch.
func TestReceiveWaitsForFirstMessage(t *testing.T) {
	url, prefix, p := sharedPublisher(t, inMemory, natsbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	s := adaptertest.Open(t, natsbroker.OpenSubscriber, url, natsbroker.SubscriberOptions{Stream: streamName(prefix), Durable: "wait"})
	d := adaptertest.FirstDelivery(ctx, t, p, s, adaptertest.Msg(prefix+".late", "k", 0), 300*time.Millisecond)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitJetStream waits until the server at url answers JetStream requests:
// an open port does not mean JetStream is ready.
func waitJetStream(t *testing.T, url string) {
	t.Helper()
	js := testenv.JetStream(t, url, nats.Timeout(2*time.Second))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jetstream not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
