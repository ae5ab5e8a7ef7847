package cloudevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
)

// A row inserted with plain SQL by a producer in another language, giving
// only the five contract columns, is delivered by `txbox relay` with
// Nats-Msg-Id = event id, and the CloudEvents Go SDK decodes it.
func TestForeignRowDecodedByCloudEventsSDK(t *testing.T) {
	st := storeenv.Postgres{}
	s := st.Open(t)
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	srv := testenv.StartNATS(t)
	id := txbox.NewID()
	st.ForeignInsert(t, s, id, "Invoice", "inv-42", "InvoiceIssued", `{"amount": 99.5, "currency": "EUR"}`)
	scenario.Start(t, testenv.Binary(t), "relay", "--db", st.URL(t, s), "--outbox-table", s.Tables().Outbox,
		"--broker", srv.URL, "--nats-create-stream", "--source", "billing", "--poll-interval", "50ms")

	js := testenv.JetStream(t, srv.URL)
	var stored *jetstream.RawStreamMsg
	deadline := time.Now().Add(20 * time.Second)
	for stored == nil {
		if time.Now().After(deadline) {
			t.Fatal("the foreign row never reached the stream")
		}
		if str, err := js.Stream(ctx, "TXBOX"); err == nil {
			stored, _ = str.GetLastMsgForSubject(ctx, "outbox.Invoice.InvoiceIssued")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := stored.Header.Get("Nats-Msg-Id"); got != id {
		t.Fatalf("Nats-Msg-Id = %q, want the event id %s", got, id)
	}
	ev := decodeStored(ctx, t, stored)
	if ev.ID() != id || ev.Type() != "InvoiceIssued" || ev.Source() != "billing" || ev.Subject() != "inv-42" ||
		ev.DataContentType() != "application/json" || ev.Extensions()["aggregatetype"] != "Invoice" || ev.Time().IsZero() {
		t.Fatalf("decoded event: %s", ev)
	}
	if string(ev.Data()) != `{"amount": 99.5, "currency": "EUR"}` {
		t.Fatalf("data = %s", ev.Data())
	}
}
