package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
)

// TestWireFormat: the record is the CloudEvents Kafka binding's binary mode:
// ce_ headers for every attribute but datacontenttype, which is
// content-type; key = aggregate id; value = the payload bytes.
func TestWireFormat(t *testing.T) {
	kc := kafkatest.Start(t)
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{CreateTopics: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.UTC)
	e := txbox.Event{
		ID: txbox.NewID(), Type: "OrderPlaced", AggregateType: "Order", AggregateID: "order-7",
		AggregateVersion: 3, OccurredAt: at,
		Headers: map[string]string{"traceparent": adaptertest.TraceParent},
		Payload: []byte(`{ "total" : 12.5 }`),
	}
	adaptertest.PublishOK(ctx, t, p, []broker.Message{{Event: e, Topic: "wire.Order", Source: "shop/orders"}})
	recs := kc.ReadAll(t, "wire.Order", 1, 10*time.Second)
	if len(recs) != 1 {
		t.Fatalf("read %d records, want 1", len(recs))
	}
	r := recs[0]
	want := map[string]string{
		"ce_specversion": "1.0", "ce_id": e.ID, "ce_type": "OrderPlaced", "ce_source": "shop/orders",
		"ce_subject": "order-7", "ce_time": "2025-03-01T12:30:45.123456789Z", "content-type": "application/json",
		"ce_aggregatetype": "Order", "ce_aggregateversion": "3", "ce_traceparent": e.Headers["traceparent"],
	}
	got := map[string]string{}
	for _, h := range r.Headers {
		if _, dup := got[h.Key]; dup {
			t.Errorf("header %s twice", h.Key)
		}
		got[h.Key] = string(h.Value)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected header %s = %q", k, got[k])
		}
	}
	if string(r.Key) != "order-7" || string(r.Value) != string(e.Payload) {
		t.Errorf("key %q value %q", r.Key, r.Value)
	}
}

// TestPermanentErrorsNameTheProblem: what the relay writes to last_error
// says which topic or size was wrong, and the good message of the call is
// still confirmed.
func TestPermanentErrorsNameTheProblem(t *testing.T) {
	kc := kafkatest.Start(t)
	if err := kc.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2048"}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CreateTopic("ok", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := adaptertest.Msg("small", "k", 1)
	big.Event.Payload = []byte(`"` + strings.Repeat("x", 3000) + `"`)
	badHeader := adaptertest.Msg("ok", "k", 2)
	badHeader.Event.Headers = map[string]string{"Bad-Name": "x"}
	msgs := []broker.Message{big, badHeader, adaptertest.Msg("Order Created", "k", 3), adaptertest.Msg("ok", "k", 4), adaptertest.Msg("small", "k", 5)}
	adaptertest.Verdicts(t, p.Publish(ctx, msgs), []string{"limit of 2048 bytes", "Bad-Name", `has ' '`, "", ""})
}

// TestBrokerVerdicts: errors the broker sends back are classified: a record
// it says is too large is permanent; a topic it refuses to authorise, and a
// partition that keeps answering with a retriable error past the deadline,
// are outages of the way out.
func TestBrokerVerdicts(t *testing.T) {
	kc := kafkatest.Start(t)
	for _, topic := range []string{"large", "authz", "slow", "fine"} {
		if err := kc.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Learn the topics first, so the faults hit the produce requests only.
	for _, err := range p.Publish(ctx, []broker.Message{adaptertest.Msg("large", "k", 0), adaptertest.Msg("authz", "k", 0), adaptertest.Msg("slow", "k", 0), adaptertest.Msg("fine", "k", 0)}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := kc.Kfake().Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "large", Err: kerr.MessageTooLarge, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "authz", Err: kerr.TopicAuthorizationFailed, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "slow", Err: kerr.NotEnoughReplicas, Count: -1},
	)
	defer h.Remove()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	errs := p.Publish(sctx, []broker.Message{adaptertest.Msg("large", "k", 1), adaptertest.Msg("authz", "k", 1), adaptertest.Msg("slow", "k", 1), adaptertest.Msg("fine", "k", 1)})
	check := func(i int, sentinel error, text string) {
		t.Helper()
		if !errors.Is(errs[i], sentinel) || !strings.Contains(errs[i].Error(), text) {
			t.Errorf("message %d: %v, want %v mentioning %q", i, errs[i], sentinel, text)
		}
	}
	check(0, txbox.ErrPermanent, "max.message.bytes")
	check(1, txbox.ErrBrokerUnavailable, `not authorized to write to topic "authz"`)
	check(2, txbox.ErrBrokerUnavailable, "slow")
	for i := range 3 {
		if i > 0 && errors.Is(errs[i], txbox.ErrPermanent) {
			t.Errorf("message %d: %v, an outage must not be permanent", i, errs[i])
		}
	}
	if errs[3] != nil {
		t.Errorf("message on the healthy topic: %v", errs[3])
	}
}

// TestCreateTopics: with CreateTopics a missing topic is made with the
// configured partitions, by the first of several concurrent publishers.
func TestCreateTopics(t *testing.T) {
	kc := kafkatest.Start(t)
	var wg sync.WaitGroup
	for g := range 3 {
		p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{CreateTopics: true, Partitions: 5})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Publish(ctx, []broker.Message{adaptertest.Msg("made.Order.Created", fmt.Sprint(g), g)})[0]; err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(kc.Kfake().PartitionInfos("made.Order.Created")); n != 5 {
		t.Errorf("created topic has %d partitions, want 5", n)
	}
}

// TestConcurrentPublishKeepsKeyOrder: concurrent calls, each in key order,
// land in key order (one partition per key).
func TestConcurrentPublishKeepsKeyOrder(t *testing.T) {
	kc, p := withTopic(t, "conc", 4)
	var wg sync.WaitGroup
	const per = 200
	for g := range 4 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var msgs []broker.Message
			for i := range per {
				msgs = append(msgs, adaptertest.Msg("conc", fmt.Sprintf("key-%d", g), i))
			}
			for i, err := range p.Publish(ctx, msgs) {
				if err != nil {
					t.Errorf("goroutine %d message %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	recs := kc.ReadAll(t, "conc", 4*per, 10*time.Second)
	if len(recs) != 4*per {
		t.Fatalf("read %d records, want %d", len(recs), 4*per)
	}
	next := map[string]int{}
	for _, r := range recs {
		k := string(r.Key)
		if want := fmt.Sprintf(`{"n":%d}`, next[k]); string(r.Value) != want {
			t.Fatalf("key %s: record %s, want %s", k, r.Value, want)
		}
		next[k]++
	}
}

// TestNoLateWriteAfterOutage: records that could not be confirmed while the
// broker was down are not written after the broker is back, behind records
// published later (the relay republishes them; a late copy after a later
// event of the key would break per-key order).
func TestNoLateWriteAfterOutage(t *testing.T) {
	kc, p := withTopic(t, "late", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adaptertest.PublishOK(ctx, t, p, []broker.Message{adaptertest.Msg("late", "k", 0)})
	kc.Stop()
	for round := 1; round <= 3; round++ {
		dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := p.Publish(dctx, []broker.Message{adaptertest.Msg("late", "k", round)})[0]
		dcancel()
		if !errors.Is(err, txbox.ErrBrokerUnavailable) {
			t.Fatalf("round %d with the broker down: %v", round, err)
		}
	}
	kc.Start()
	var last error
	for attempt := 0; attempt < 100; attempt++ {
		actx, acancel := context.WithTimeout(context.Background(), time.Second)
		last = p.Publish(actx, []broker.Message{adaptertest.Msg("late", "k", 99)})[0]
		acancel()
		if last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("no publish after the restart: %v", last)
	}
	time.Sleep(500 * time.Millisecond) // give a late write time to happen
	recs := kc.ReadAll(t, "late", 2, 5*time.Second)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	after := false
	for _, v := range got {
		if v == `{"n":99}` {
			after = true
		} else if after {
			t.Fatalf("record %s written after a later one: %v", v, got)
		}
	}
	t.Logf("partition holds %v", got)
}

// TestOpenErrors: configuration mistakes and an unreachable cluster are told
// apart.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, bad := range []string{"", "kafka://user:s3cret@h:9092", "nats://h:4222", "kafka://h:port", "kafka://h:9092/path"} {
		_, err := kafkabroker.Open(ctx, bad, kafkabroker.Options{Connection: kafkabroker.Connection{Logger: adaptertest.Quiet}})
		if !errors.Is(err, txbox.ErrConfig) {
			t.Errorf("Open(%q) = %v, want a config error", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	kc := kafkatest.Start(t)
	_, err := kafkabroker.Open(ctx, kc.URL(), kafkabroker.Options{Connection: kafkabroker.Connection{Logger: adaptertest.Quiet, ClientOptions: []kgo.Opt{kgo.DisableIdempotentWrite()}}})
	if !errors.Is(err, txbox.ErrConfig) || !strings.Contains(err.Error(), "idempotent") {
		t.Errorf("DisableIdempotentWrite: %v, want a config error", err)
	}
	_, err = kafkabroker.OpenSubscriber(ctx, kc.URL(), kafkabroker.SubscriberOptions{Topics: []string{"x"}, Connection: kafkabroker.Connection{Logger: adaptertest.Quiet}})
	if !errors.Is(err, txbox.ErrConfig) {
		t.Errorf("subscriber without group: %v, want a config error", err)
	}
	kc.Stop()
	start := time.Now()
	_, err = kafkabroker.Open(ctx, kc.URL(), kafkabroker.Options{Connection: kafkabroker.Connection{Logger: adaptertest.Quiet, ConnectTimeout: 500 * time.Millisecond}})
	if !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Errorf("cluster down: %v, want ErrBrokerUnavailable", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Open against a closed port took %v", el)
	}
}

func TestParseBrokers(t *testing.T) {
	for in, want := range map[string]string{
		"kafka://127.0.0.1:9092":                  "127.0.0.1:9092",
		"kafka://a:1,b:2":                         "a:1,b:2",
		"kafka://a:1, kafka://b:2/":               "a:1,b:2",
		"broker-1":                                "broker-1:9092",
		"KAFKA://[::1]:9093":                      "[::1]:9093",
		"kafka://h1.example.com,h2.example.com:1": "h1.example.com:9092,h2.example.com:1",
	} {
		got, err := kafkabroker.ParseBrokers(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("ParseBrokers(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " , ", "kafka://:9092", "kafka://h:0", "kafka://h:70000", "http://h:1", "kafka://u:p@h:1", "kafka://h:1?x=y", "::1:9092"} {
		if _, err := kafkabroker.ParseBrokers(bad); !errors.Is(err, txbox.ErrConfig) {
			t.Errorf("ParseBrokers(%q) = %v, want a config error", bad, err)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, ok := range []string{"outbox.Order.Created", "a", "a-b_c.D1", strings.Repeat("x", 249), "..."} {
		if err := kafkabroker.ValidateTopic(ok); err != nil {
			t.Errorf("ValidateTopic(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("x", 250), "a b", "a/b", "a:b", "a*", "ü", "a\x00"} {
		if err := kafkabroker.ValidateTopic(bad); err == nil {
			t.Errorf("ValidateTopic(%q) = nil, want an error", bad)
		}
	}
}

// TestClientOptions: franz-go's own options apply after txbox's, on both
// sides: a client id of the caller's replaces txbox's, and a dialer of the
// caller's makes the connections.
func TestClientOptions(t *testing.T) {
	kc := kafkatest.Start(t)
	if err := kc.CreateTopic("opts", 1, nil); err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	own := []kgo.Opt{kgo.ClientID("billing-relay"), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	})}
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{Connection: kafkabroker.Connection{ClientOptions: own}})
	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "opts", Topics: []string{"opts"}, Connection: kafkabroker.Connection{ClientOptions: own}})
	for side, cl := range map[string]*kgo.Client{"publisher": p.Client(), "subscriber": s.Client()} {
		if id, _ := cl.OptValue(kgo.ClientID).(string); id != "billing-relay" {
			t.Errorf("%s client id %q, want the caller's", side, id)
		}
	}
	if n := dials.Load(); n < 2 {
		t.Errorf("%d connections through the caller's dialer, want one per side at least", n)
	}
}
