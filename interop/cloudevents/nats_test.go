package cloudevents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	natsce "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/testenv"
)

func streamName(prefix string) string {
	return strings.ReplaceAll(strings.ToUpper(prefix), ".", "_")
}

// TestNATSCloudEventsSDKDecodes: what the publisher stores is a binary-mode
// CloudEvent to the official Go SDK's JetStream binding, with every
// attribute where a non-txbox consumer would look for it.
func TestNATSCloudEventsSDKDecodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	prefix := "txboxinterop.s" + strings.ReplaceAll(txbox.NewID(), "-", "")
	stream := streamName(prefix)
	nc0, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc0.Close()
	js0, _ := jetstream.New(nc0)
	if _, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js0.DeleteStream(context.Background(), stream) })
	p, err := natsbroker.Open(ctx, url, natsbroker.Options{Stream: stream, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.UTC)
	e := txbox.Event{
		ID: txbox.NewID(), Type: "OrderPlaced", AggregateType: "Order", AggregateID: "order-7",
		AggregateVersion: 3, OccurredAt: at,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Payload: []byte(`{"total":12.5,"items":["a","b"]}`),
	}
	topic := prefix + ".Order.OrderPlaced"
	if err := p.Publish(ctx, []broker.Message{{Event: e, Topic: topic, Source: "shop/orders"}})[0]; err != nil {
		t.Fatal(err)
	}

	// Read the stored message back with plain JetStream, untouched by txbox.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetLastMsgForSubject(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	m := natsce.NewMessage(&nats.Msg{Subject: stored.Subject, Header: stored.Header, Data: stored.Data})
	if enc := m.ReadEncoding(); enc != binding.EncodingBinary {
		t.Fatalf("SDK sees encoding %v, want binary", enc)
	}
	ev, err := binding.ToEvent(ctx, m)
	if err != nil {
		t.Fatalf("SDK binding.ToEvent: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("SDK says the event is invalid: %v", err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("specversion", ev.SpecVersion(), "1.0")
	check("id", ev.ID(), e.ID)
	check("type", ev.Type(), e.Type)
	check("source", ev.Source(), "shop/orders")
	check("subject", ev.Subject(), e.AggregateID)
	check("time", ev.Time().UTC(), at)
	check("datacontenttype", ev.DataContentType(), "application/json")
	ext := ev.Extensions()
	check("aggregatetype", ext["aggregatetype"], "Order")
	check("aggregateversion", ext["aggregateversion"], "3")
	check("traceparent", ext["traceparent"], e.Headers["traceparent"])
	check("data", string(ev.Data()), string(e.Payload))
	for k := range ext {
		switch k {
		case "aggregatetype", "aggregateversion", "traceparent":
		default:
			t.Errorf("unexpected extension %q = %v", k, ext[k])
		}
	}
}
