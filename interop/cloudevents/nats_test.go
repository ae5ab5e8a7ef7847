package cloudevents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	natsce "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/event"
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
	js := testenv.JetStream(t, url)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	p, err := natsbroker.Open(ctx, url, natsbroker.Options{Stream: stream, Connection: natsbroker.Connection{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	e := orderEvent()
	topic := prefix + ".Order.OrderPlaced"
	if err := p.Publish(ctx, []broker.Message{{Event: e, Topic: topic, Source: "shop/orders"}})[0]; err != nil {
		t.Fatal(err)
	}

	// Read the stored message back with plain JetStream, untouched by txbox.
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetLastMsgForSubject(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	checkOrderEvent(t, decodeStored(ctx, t, stored), e)
}

// decodeStored is the SDK's JetStream binding's reading of a message as the
// stream stores it.
func decodeStored(ctx context.Context, t *testing.T, stored *jetstream.RawStreamMsg) *event.Event {
	t.Helper()
	return decodeSDK(ctx, t, natsce.NewMessage(&nats.Msg{Subject: stored.Subject, Header: stored.Header, Data: stored.Data}))
}
