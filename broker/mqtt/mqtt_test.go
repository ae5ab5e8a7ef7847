package mqttbroker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/internal/testenv"
)

func harness(t *testing.T, url string, opts mqttbroker.Options) brokertest.Harness {
	run := adaptertest.Unique("bt")
	var n atomic.Int64
	const ackWait = time.Second
	opts.Logger = adaptertest.Quiet
	return brokertest.Harness{
		// QoS 1 on one connection keeps publish order per topic, and the
		// relay publishes an aggregate's next event only once the one
		// before was acknowledged; persistent sessions get back what they
		// did not acknowledge; MQTT has no dedupe. Persistent is
		// Options.AssumePersistent.
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			return brokertest.Capabilities{OrderPerKey: true, Persistent: opts.AssumePersistent, Redelivery: true,
				MaxPayload: p.(*mqttbroker.Publisher).MaxPayload()}
		},
		NewPublisher: adaptertest.NewPublisher(mqttbroker.Open, url, opts),
		NewSubscriber: adaptertest.NewSubscriber(mqttbroker.OpenSubscriber, url, func(group, topic string) mqttbroker.SubscriberOptions {
			return mqttbroker.SubscriberOptions{ClientID: run + "-" + group, Topics: []string{topic}, AckWait: ackWait, SessionExpiry: 2 * time.Minute}
		}),
		Topic: func(*testing.T) string { return fmt.Sprintf("txboxtest/%s/t%d/Order/Created", run, n.Add(1)) },
		InvalidTopics: []string{
			"", "txboxtest/+/x", "txboxtest/#", "#", "txboxtest/a\x00b", "txboxtest/a\nb", "txboxtest/\xff",
			"$SYS/txboxtest",
		},
		AckWait:        ackWait,
		SubscribeFirst: true,
		PublishRaw: func(ctx context.Context, t *testing.T, topic string, headers map[string]string, body []byte) {
			props := &paho.PublishProperties{}
			for k, v := range headers {
				props.User.Add(k, v)
			}
			rawPublish(ctx, t, url, &paho.Publish{QoS: 1, Topic: topic, Properties: props, Payload: body})
		},
	}
}

// TestConformance runs brokertest against a mosquitto process of this
// test's own, so the broker-down case can stop and restart it. It announces
// a Maximum Packet Size, which the publisher checks. Persistent is declared
// because this broker saves its store on a clean shutdown, which is how the
// harness stops it.
func TestConformance(t *testing.T) {
	srv := testenv.StartMosquitto(t, "max_packet_size 65536")
	h := harness(t, srv.URL, mqttbroker.Options{AssumePersistent: true, Connection: mqttbroker.Connection{ConnectTimeout: 2 * time.Second}})
	h.StopBroker = func(*testing.T) { srv.Stop() }
	h.StartBroker = func(*testing.T) { srv.Start() }
	brokertest.Run(t, h)
	if t.Failed() {
		t.Logf("mosquitto log:\n%s", srv.Log())
	}
}

// TestConformanceSharedBroker runs brokertest against the machine's
// Mosquitto (TXBOX_TEST_MQTT), as it is configured; the broker-down case is
// skipped there. Payloads are limited by Options.MaxPayload.
func TestConformanceSharedBroker(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	brokertest.Run(t, harness(t, url, mqttbroker.Options{MaxPayload: 32 << 10}))
}

// rawPublish publishes pb with a plain paho client, as a foreign producer.
func rawPublish(ctx context.Context, t *testing.T, rawURL string, pb *paho.Publish) {
	t.Helper()
	cli := rawClient(ctx, t, rawURL, adaptertest.Unique("raw"), nil)
	defer cli.Disconnect(&paho.Disconnect{})
	resp, err := cli.Publish(ctx, pb)
	if err != nil {
		t.Fatalf("raw publish: %v", err)
	}
	if resp.ReasonCode >= 0x80 {
		t.Fatalf("raw publish: reason 0x%02x", resp.ReasonCode)
	}
}

func rawClient(ctx context.Context, t *testing.T, rawURL, clientID string, onPublish func(paho.PublishReceived) (bool, error)) *paho.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: clientID, Conn: nc}
	if onPublish != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){onPublish}
	}
	cli := paho.NewClient(cfg)
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	return cli
}

// TestPermanentErrorsNameTheProblem: the last_error an operator reads says
// which topic, value or size was wrong, and the good messages of the call
// still go.
func TestPermanentErrorsNameTheProblem(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	p := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{MaxPayload: 1024})
	prefix := adaptertest.Unique("txboxtest/perm")
	big := adaptertest.Msg(prefix+"/big", "k", 1)
	big.Event.Payload = []byte(`"` + strings.Repeat("x", 2000) + `"`)
	badHeader := adaptertest.Msg(prefix+"/h", "k", 2)
	badHeader.Event.Headers = map[string]string{"traceparent": "00-abc\r\nInjected: yes"}
	msgs := []broker.Message{adaptertest.Msg(prefix+"/+/x", "k", 0), big, badHeader, adaptertest.Msg("$SYS/x", "k", 3), adaptertest.Msg(prefix+"/ok", "k", 4)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adaptertest.Verdicts(t, p.Publish(ctx, msgs), []string{"wildcard", "configured limit of 1024", "control character", "reserved", ""})
}

// TestRequireSubscribers: a message no subscription matched is confirmed
// and counted, or, with RequireSubscribers, an outage (the destination is
// missing until a subscription is made), confirmed once there is one.
func TestRequireSubscribers(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	topic := adaptertest.Unique("txboxtest/nobody/") + "/x"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lax := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{})
	adaptertest.PublishOK(ctx, t, lax, []broker.Message{adaptertest.Msg(topic, "k", 0)})
	if n := lax.NoSubscribers(); n != 1 {
		t.Errorf("NoSubscribers() = %d, want 1", n)
	}
	strict := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{RequireSubscribers: true})
	err := strict.Publish(ctx, []broker.Message{adaptertest.Msg(topic, "k", 1)})[0]
	if !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent) || !strings.Contains(err.Error(), "no subscription") {
		t.Fatalf("RequireSubscribers: err = %v, want an outage (txbox.ErrBrokerUnavailable) about no subscription", err)
	}
	adaptertest.Open(t, mqttbroker.OpenSubscriber, url, mqttbroker.SubscriberOptions{ClientID: adaptertest.Unique("req"), Topics: []string{topic}})
	if err := strict.Publish(ctx, []broker.Message{adaptertest.Msg(topic, "k", 2)})[0]; err != nil {
		t.Fatalf("RequireSubscribers with a subscriber: %v", err)
	}
}

// TestUnackedComesBackToTheSession: a delivery neither acknowledged nor
// settled when its process goes (the subscriber closes) is delivered again,
// marked DUP, to the next connection of the same session; messages
// published while the consumer was away are queued for it.
func TestUnackedComesBackToTheSession(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	topic := adaptertest.Unique("txboxtest/session/") + "/x"
	id := adaptertest.Unique("sess")
	opts := mqttbroker.SubscriberOptions{ClientID: id, Topics: []string{topic}, AckWait: -1}
	s := adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	p := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, second := adaptertest.Msg(topic, "k", 0), adaptertest.Msg(topic, "k", 1)
	adaptertest.PublishOK(ctx, t, p, []broker.Message{first})
	ds, err := s.Receive(ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].Attempt() != 1 {
		t.Fatalf("first receive: %d deliveries, %v", len(ds), err)
	}
	s.Close() // without Ack: as if the process died
	adaptertest.PublishOK(ctx, t, p, []broker.Message{second})
	s = adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	var got []string
	adaptertest.Each(ctx, t, s, 2, func(d broker.Delivery, e txbox.Event) {
		if e.ID == first.Event.ID && d.Attempt() != 2 {
			t.Errorf("redelivered message: Attempt() = %d, want 2 (DUP)", d.Attempt())
		}
		got = append(got, e.ID)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if got[0] != first.Event.ID || got[1] != second.Event.ID {
		t.Fatalf("after reconnect got %v, want %s then %s", got, first.Event.ID, second.Event.ID)
	}
}

// TestNakHoldsLaterAcks: while a Nak'd message waits for its redelivery,
// later messages are processed and acknowledged; once it is acknowledged,
// nothing comes back, not even after the session is resumed.
func TestNakHoldsLaterAcks(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	topic := adaptertest.Unique("txboxtest/nak/") + "/x"
	opts := mqttbroker.SubscriberOptions{ClientID: adaptertest.Unique("nak"), Topics: []string{topic}, AckWait: -1}
	s := adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	p := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var msgs []broker.Message
	for i := range 5 {
		msgs = append(msgs, adaptertest.Msg(topic, fmt.Sprint("k", i), i))
	}
	adaptertest.PublishOK(ctx, t, p, msgs)
	adaptertest.Each(ctx, t, s, 6, func(d broker.Delivery, e txbox.Event) {
		if e.ID == msgs[0].Event.ID && d.Attempt() == 1 {
			if err := d.Nak(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
	time.Sleep(100 * time.Millisecond) // let the PUBACKs go
	s.Close()
	s = adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	adaptertest.Silent(t, s, 700*time.Millisecond, "after all were acked, the resumed session must get nothing")
}

// TestStructuredMode: an MQTT 3.1.1-style producer sends the JSON event
// format; the subscriber decodes it.
func TestStructuredMode(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	topic := adaptertest.Unique("txboxtest/structured/") + "/x"
	s := adaptertest.Open(t, mqttbroker.OpenSubscriber, url, mqttbroker.SubscriberOptions{ClientID: adaptertest.Unique("st"), Topics: []string{topic}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"specversion":"1.0","id":"0190a4c8-0000-7000-8000-000000000001","type":"OrderPlaced","source":"legacy","subject":"o-7",` +
		`"aggregatetype":"Order","aggregateversion":3,"time":"2024-05-01T10:00:00Z","datacontenttype":"application/json","data":{"total": 12.5}}`
	rawPublish(ctx, t, url, &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(body),
		Properties: &paho.PublishProperties{ContentType: "application/cloudevents+json; charset=utf-8"}})
	d, e := adaptertest.One(ctx, t, s)
	if e.Type != "OrderPlaced" || e.AggregateID != "o-7" || e.AggregateVersion != 3 || string(e.Payload) != `{"total": 12.5}` {
		t.Fatalf("decoded %+v (payload %s)", e, e.Payload)
	}
	_ = d.Ack(ctx)
}

// TestPasswordNeverShown: the URL's password appears in no error.
func TestPasswordNeverShown(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // refused: nothing listens
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, u := range []string{"mqtt://user:s3cr3t@" + addr, "mqtt://user:s3cr3t@" + addr + "/path", "bogus://user:s3cr3t@x", "mqtt://user:s3cr3t@[::1"} {
		_, err := mqttbroker.Open(ctx, u, mqttbroker.Options{Connection: mqttbroker.Connection{Logger: adaptertest.Quiet}})
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%q) = %v: want an error without the password", redact.URL(u), err)
		}
		_, err = mqttbroker.OpenSubscriber(ctx, u, mqttbroker.SubscriberOptions{ClientID: "x", Topics: []string{"x"}, Connection: mqttbroker.Connection{Logger: adaptertest.Quiet}})
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("OpenSubscriber(%q) = %v: want an error without the password", redact.URL(u), err)
		}
	}
	if _, err := mqttbroker.Open(ctx, "mqtt://user:s3cr3t@"+addr, mqttbroker.Options{Connection: mqttbroker.Connection{Logger: adaptertest.Quiet}}); !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("refused connection: %v, want ErrBrokerUnavailable", err)
	}
	if _, err := mqttbroker.Open(ctx, "kafka://x", mqttbroker.Options{Connection: mqttbroker.Connection{Logger: adaptertest.Quiet}}); !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("bad scheme: %v, want a config error", err)
	}
}

// TestClientOptions: the caller's paho settings apply after txbox's, on
// both sides: an authentication method the broker does not know is
// refused as configuration. MaxAckPending is checked against MQTT's range.
func TestClientOptions(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	auth := func(cc *paho.ClientConfig, cp *paho.Connect) {
		if cc.PacketTimeout <= 0 || cp.Properties == nil || cp.Properties.ReceiveMaximum == nil {
			t.Errorf("ClientOptions saw no packet timeout or Receive Maximum: txbox's settings come first")
		}
		cp.Properties.AuthMethod = "txbox-test-unknown"
	}
	adaptertest.ConfigRefused(t, "bad authentication method", map[string]func(context.Context) error{
		"publisher":  adaptertest.Opening(mqttbroker.Open, url, mqttbroker.Options{Connection: mqttbroker.Connection{ClientOptions: auth}}),
		"subscriber": adaptertest.Opening(mqttbroker.OpenSubscriber, url, mqttbroker.SubscriberOptions{ClientID: adaptertest.Unique("auth"), Topics: []string{"txboxtest/auth"}, Connection: mqttbroker.Connection{ClientOptions: auth}}),
	})
	adaptertest.ConfigRefused(t, "MaxAckPending", map[string]func(context.Context) error{
		"MaxAckPending -1":    adaptertest.Opening(mqttbroker.OpenSubscriber, url, mqttbroker.SubscriberOptions{ClientID: "x", Topics: []string{"x"}, MaxAckPending: -1}),
		"MaxAckPending 65536": adaptertest.Opening(mqttbroker.OpenSubscriber, url, mqttbroker.SubscriberOptions{ClientID: "x", Topics: []string{"x"}, MaxAckPending: 65536}),
	})
}

func TestValidateTopicAndFilter(t *testing.T) {
	for _, ok := range []string{"a", "a/b", "/a", "a//b", "outbox.Order.Created", "ünïcode/✓"} {
		if err := mqttbroker.ValidateTopic(ok); err != nil {
			t.Errorf("ValidateTopic(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/+", "#", "a\x00", "\x7f", "a\u0085b", "$SYS/a", "\xc3\x28", "a\uffffb", strings.Repeat("a", 65536)} {
		if err := mqttbroker.ValidateTopic(bad); err == nil {
			t.Errorf("ValidateTopic(%q) = nil", bad)
		}
	}
	for _, ok := range []string{"#", "+", "a/#", "a/+/b", "+/+", "$share/g/a/#", "a"} {
		if err := mqttbroker.ValidateFilter(ok); err != nil {
			t.Errorf("ValidateFilter(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a#", "a/#/b", "a+/b", "a/b+", "#/a", "a\x00"} {
		if err := mqttbroker.ValidateFilter(bad); err == nil {
			t.Errorf("ValidateFilter(%q) = nil", bad)
		}
	}
}

// TestReceiveMaximumRespected: with a broker that takes only 3 unacknowledged
// publishes at a time (Mosquitto disconnects a client that sends more), a
// call of 200 and three concurrent calls still confirm everything, in order
// per topic.
func TestReceiveMaximumRespected(t *testing.T) {
	srv := testenv.StartMosquitto(t, "max_inflight_messages 3")
	topic := "txboxtest/recvmax/"
	s := adaptertest.Open(t, mqttbroker.OpenSubscriber, srv.URL, mqttbroker.SubscriberOptions{ClientID: "order", Topics: []string{topic + "#"}, AckWait: -1})
	p := adaptertest.Open(t, mqttbroker.Open, srv.URL, mqttbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adaptertest.PublishConcurrently(ctx, t, p, 4, 200, func(g int) string { return fmt.Sprintf("%sg%d", topic, g) })
	next := map[string]int{}
	adaptertest.Each(ctx, t, s, 800, func(d broker.Delivery, e txbox.Event) {
		tp := d.Raw().Topic
		if want := fmt.Sprintf(`{"n":%d}`, next[tp]); string(e.Payload) != want {
			t.Fatalf("%s: got %s, want %s", tp, e.Payload, want)
		}
		next[tp]++
		_ = d.Ack(ctx)
	})
}

// TestAcksOfQueuedMessages: messages the broker queued for a session while
// its consumer was away arrive right after CONNACK; acknowledging them must
// reach the broker (paho forgets them; the Subscriber sends their PUBACKs
// itself), so that a resumed session gets none of them again.
func TestAcksOfQueuedMessages(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_MQTT")
	topic := adaptertest.Unique("txboxtest/queued/") + "/x"
	opts := mqttbroker.SubscriberOptions{ClientID: adaptertest.Unique("queued"), Topics: []string{topic}, AckWait: -1}
	adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts).Close()
	p := adaptertest.Open(t, mqttbroker.Open, url, mqttbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := adaptertest.Msgs(topic, "k", 50)
	adaptertest.PublishOK(ctx, t, p, msgs)
	s := adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	adaptertest.Receive(ctx, t, s, len(msgs), func(d broker.Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack of %s: %v", d.Raw().ID, err)
		}
	})
	time.Sleep(100 * time.Millisecond) // let the PUBACKs go
	s.Close()
	s = adaptertest.Open(t, mqttbroker.OpenSubscriber, url, opts)
	adaptertest.Silent(t, s, 700*time.Millisecond, "the resumed session must not get acknowledged messages again")
}
