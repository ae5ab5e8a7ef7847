package kafkabroker_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
	"github.com/txbox/txbox/internal/testenv"
)

// TestKcatReadsTheEvent: a stock command-line client (kcat, librdkafka)
// reads what the publisher wrote: the ce_ headers, content-type, the key and
// the payload bytes. Without kcat (Debian package kcat) it skips locally and
// fails under TXBOX_REQUIRE_SERVICES=1; .ci/run installs it.
func TestKcatReadsTheEvent(t *testing.T) {
	bin := testenv.Tool(t, "kcat", "kafkacat")
	kc := kafkatest.Start(t)
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{CreateTopics: true, Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := txbox.Event{
		ID: txbox.NewID(), Type: "InvoiceIssued", AggregateType: "Invoice", AggregateID: "inv-42",
		AggregateVersion: 2, OccurredAt: time.Date(2025, 6, 1, 8, 0, 0, 5000, time.UTC),
		Headers: map[string]string{"traceparent": adaptertest.TraceParent},
		Payload: []byte(`{"amount": 99.5, "currency": "EUR", "note": "naïve"}`),
	}
	adaptertest.PublishOK(ctx, t, p, []broker.Message{{Event: e, Topic: "outbox.Invoice.InvoiceIssued", Source: "billing"}})
	out, err := exec.CommandContext(ctx, bin, "-C", "-b", kc.Addr(), "-t", "outbox.Invoice.InvoiceIssued",
		"-o", "beginning", "-c", "1", "-e", "-q", "-J").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kcat: %v\n%s%s", err, out, stderr)
	}
	var rec struct {
		Topic   string   `json:"topic"`
		Key     string   `json:"key"`
		Payload string   `json:"payload"`
		Headers []string `json:"headers"` // name, value, name, value, ...
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("kcat -J output %q: %v", out, err)
	}
	t.Logf("kcat: %s", out)
	h := map[string]string{}
	for i := 0; i+1 < len(rec.Headers); i += 2 {
		h[rec.Headers[i]] = rec.Headers[i+1]
	}
	want := map[string]string{
		"ce_specversion": "1.0", "ce_id": e.ID, "ce_type": "InvoiceIssued", "ce_source": "billing",
		"ce_subject": "inv-42", "ce_time": "2025-06-01T08:00:00.000005Z", "content-type": "application/json",
		"ce_aggregatetype": "Invoice", "ce_aggregateversion": "2", "ce_traceparent": e.Headers["traceparent"],
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("kcat sees header %s = %q, want %q", k, h[k], v)
		}
	}
	if rec.Key != "inv-42" || rec.Payload != string(e.Payload) {
		t.Errorf("kcat sees key %q payload %q", rec.Key, rec.Payload)
	}
}
