package main_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox/internal/testenv"
)

// --nats-create-stream with a topic that an existing stream does not
// capture (a mistyped --topic) is refused, exit 2 naming the flag, and the
// stream is left as it was; naming the subjects with --nats-subjects adds
// them; a missing stream is still created.
func TestNATSCreateStreamDoesNotWidenAStreamSilently(t *testing.T) {
	srv := testenv.StartNATS(t)
	js := testenv.JetStream(t, srv.URL)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TXBOX", Subjects: []string{"outbox.>"}}); err != nil {
		t.Fatal(err)
	}
	subjects := func(name string) []string {
		t.Helper()
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		return st.CachedInfo().Config.Subjects
	}
	db := migratedSQLite(t)
	relay := []string{"relay", "--db", db, "--broker", srv.URL, "--nats-create-stream", "--fail-fast"}

	// Bounded: a relay that is not refused runs until it is stopped.
	out, code := runFor(t, time.Minute, nil, append(relay, "--topic", "ordres.{aggregate_type}.{event_type}")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 2 || !strings.Contains(lines[len(lines)-1], "--nats-create-stream (TXBOX_NATS_CREATE_STREAM)") || !strings.Contains(out, "--nats-subjects ordres.>") {
		t.Fatalf("mistyped --topic with --nats-create-stream: exit %d, want 2 naming --nats-create-stream and --nats-subjects:\n%s", code, out)
	}
	if got := subjects("TXBOX"); !slices.Equal(got, []string{"outbox.>"}) {
		t.Fatalf("the refused start changed the stream's subjects: %v", got)
	}

	// The default topic, which the stream captures: used as it is.
	runUntil(t, "relay connected", relay...)
	// Asked for by name: the subjects are added.
	runUntil(t, "relay connected", append(relay, "--topic", "ordres.{aggregate_type}.{event_type}", "--nats-subjects", "ordres.>")...)
	if got := subjects("TXBOX"); !slices.Equal(got, []string{"outbox.>", "ordres.>"}) {
		t.Fatalf("--nats-subjects ordres.>: stream subjects %v", got)
	}
	// A stream that does not exist is created.
	runUntil(t, "relay connected", append(relay, "--nats-stream", "BILLING", "--topic", "billing.{event_type}")...)
	if got := subjects("BILLING"); !slices.Equal(got, []string{"billing.>"}) {
		t.Fatalf("new stream BILLING: subjects %v", got)
	}
}
