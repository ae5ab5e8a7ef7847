package mqttbroker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
	"github.com/txbox/txbox/internal/testenv"
)

// TestStockClientDecodes: mosquitto_sub, the stock command-line client,
// receives a published event through a persistent session and shows the
// CloudEvents attributes as MQTT 5 User Properties, the content type in the
// Content Type property and the payload unchanged.
func TestStockClientDecodes(t *testing.T) {
	bin := testenv.Tool(t, "mosquitto_sub")
	raw := testenv.URL(t, "TXBOX_TEST_MQTT")
	u, _ := url.Parse(raw)
	topic := adaptertest.Unique("txboxtest/cli/") + "/Order/OrderShipped"
	id := adaptertest.Unique("cli")
	args := []string{"-V", "mqttv5", "-h", u.Hostname(), "-p", u.Port(), "-i", id, "-c", "-x", "60", "-q", "1", "-t", topic}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// First make the session and its subscription, so that the broker
	// queues the event for the client ...
	if out, err := exec.CommandContext(ctx, bin, append(args, "-E")...).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_sub -E: %v\n%s", err, out)
	}
	e := txbox.MustEvent("Order", "o-42", "OrderShipped", map[string]any{"carrier": "DHL", "note": "naïve"})
	e.AggregateVersion = 7
	e.Headers = map[string]string{"traceparent": adaptertest.TraceParent}
	p := adaptertest.Open(t, mqttbroker.Open, raw, mqttbroker.Options{})
	adaptertest.PublishOK(ctx, t, p, []broker.Message{{Event: e, Topic: topic, Source: "billing"}})
	// ... then read it: topic, content type, user properties, payload.
	out, err := exec.CommandContext(ctx, bin, append(args, "-C", "1", "-W", "10", "-F", "%t\n%C\n%P\n%p")...).Output()
	if err != nil {
		t.Fatalf("mosquitto_sub: %v\n%s", err, out)
	}
	t.Logf("mosquitto_sub printed:\n%s", out)
	lines := strings.SplitN(string(out), "\n", 4)
	if len(lines) != 4 {
		t.Fatalf("unexpected output %q", out)
	}
	if lines[0] != topic || lines[1] != "application/json" {
		t.Errorf("topic %q content type %q, want %q and application/json", lines[0], lines[1], topic)
	}
	props := map[string]string{}
	for _, kv := range strings.Fields(lines[2]) {
		k, v, _ := strings.Cut(kv, ":")
		props[k] = v
	}
	want := map[string]string{
		"specversion": "1.0", "id": e.ID, "type": "OrderShipped", "source": "billing", "subject": "o-42",
		"aggregatetype": "Order", "aggregateversion": "7", "traceparent": e.Headers["traceparent"],
		"time": e.OccurredAt.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("user property %s = %q, want %q", k, props[k], v)
		}
	}
	if _, ok := props["datacontenttype"]; ok {
		t.Errorf("datacontenttype sent as a user property; the MQTT binding puts it in Content Type only")
	}
	body := bytes.TrimRight([]byte(lines[3]), "\n")
	if !bytes.Equal(body, e.Payload) {
		t.Errorf("payload %q, want %q", body, e.Payload)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil || v["carrier"] != "DHL" {
		t.Errorf("payload is not the event's JSON: %v", err)
	}
}
