package cloudevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/txbox/txbox"
)

// orderAt is orderEvent's OccurredAt, with nanoseconds, which the time
// attribute must keep.
var orderAt = time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.UTC)

// orderEvent is what the publisher tests send (with Source "shop/orders"):
// every field a CloudEvent attribute comes from, and a traceparent.
func orderEvent() txbox.Event {
	return txbox.Event{
		ID: txbox.NewID(), Type: "OrderPlaced", AggregateType: "Order", AggregateID: "order-7",
		AggregateVersion: 3, OccurredAt: orderAt,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Payload: []byte(`{"total":12.5,"items":["a","b"]}`),
	}
}

// decodeSDK is the official SDK's reading of m, which must be a
// binary-mode CloudEvent that validates.
func decodeSDK(ctx context.Context, t *testing.T, m binding.Message) *event.Event {
	t.Helper()
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
	return ev
}

// checkOrderEvent checks that the SDK found every attribute of e (an
// orderEvent) where a non-txbox consumer looks for it, and no extension
// but txbox's and the binding's own (bindingExt).
func checkOrderEvent(t *testing.T, ev *event.Event, e txbox.Event, bindingExt ...string) {
	t.Helper()
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
	check("time", ev.Time().UTC(), orderAt)
	check("datacontenttype", ev.DataContentType(), "application/json")
	ext := ev.Extensions()
	check("aggregatetype", ext["aggregatetype"], "Order")
	check("aggregateversion", ext["aggregateversion"], "3")
	check("traceparent", ext["traceparent"], e.Headers["traceparent"])
	check("data", string(ev.Data()), string(e.Payload))
	known := map[string]bool{"aggregatetype": true, "aggregateversion": true, "traceparent": true}
	for _, k := range bindingExt {
		known[k] = true
	}
	for k := range ext {
		if !known[k] {
			t.Errorf("unexpected extension %q = %v", k, ext[k])
		}
	}
}
