package main_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

func needNATSServer(t *testing.T) *testenv.NATSServer {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		if _, err := os.Stat("/usr/sbin/nats-server"); err != nil {
			testenv.Missing(t, "nats-server")
		}
	}
	return testenv.StartNATS(t)
}

// Mistakes that used to send every event to DEAD, or retry for ever, fail
// at start: exit 2, one line naming the flag (and the topic).
func TestRelayRefusesBadTopicAndStreamAtStart(t *testing.T) {
	srv := needNATSServer(t)
	_, flags, _, _ := cliTables(t)
	relay := func(extra ...string) []string {
		return append(append([]string{"relay", "--broker", srv.URL}, flags...), extra...)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{relay("--topic", "probe.*.{event_type}"), []string{"--topic (TXBOX_TOPIC)", "wildcard"}},
		{relay("--topic", "probe fixed"), []string{"--topic (TXBOX_TOPIC)", "whitespace"}},
		{relay("--topic", "probe.>"), []string{"--topic (TXBOX_TOPIC)", "wildcard"}},
		{relay("--topic", "a..{event_type}"), []string{"--topic (TXBOX_TOPIC)", "empty token"}},
		{relay("--topic", "x.{aggregate}"), []string{"--topic (TXBOX_TOPIC)"}},
		{relay("--nats-stream", "PROBE.BAD"), []string{"--nats-stream (TXBOX_NATS_STREAM)", `"PROBE.BAD"`}},
		{relay("--nats-stream", "NOPE"), []string{"--nats-stream (TXBOX_NATS_STREAM)", `"NOPE" does not exist`, "--nats-create-stream"}},
		{relay("--topic", "probe.{event_type}"), []string{"--nats-stream (TXBOX_NATS_STREAM)", `no stream captures subject "probe.OrderPlaced" of --topic`, "--nats-create-stream"}},
		{relay("--topic", "{event_type}.x", "--nats-create-stream"), []string{"--nats-subjects (TXBOX_NATS_SUBJECTS)"}},
	} {
		out, code := run(t, nil, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 {
			t.Fatalf("txbox %v: exit %d, want 2 and one line:\n%s", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("txbox %v: want %q in:\n%s", c.args, w, out)
			}
		}
	}
	// The MQTT and Kafka rules apply to their brokers (checked before
	// connecting: nothing listens there).
	for _, c := range []struct{ broker, topic string }{
		{"mqtt://127.0.0.1:1", "probe/#/{event_type}"},
		{"kafka://127.0.0.1:1", "probe:{event_type}"},
	} {
		out, code := run(t, nil, append(relay("--topic", c.topic), "--broker", c.broker)...)
		if code != 2 || !strings.Contains(out, "--topic (TXBOX_TOPIC)") {
			t.Fatalf("--broker %s --topic %s: exit %d\n%s", c.broker, c.topic, code, out)
		}
	}

	// --nats-create-stream makes subjects that cover --topic; a relay
	// without --nats-stream then finds that stream by the topic's subject.
	out := runUntil(t, "relay started", relay("--topic", "probe.{aggregate_type}.{event_type}", "--nats-create-stream")...)
	if !strings.Contains(out, "subjects=[probe.>]") {
		t.Fatalf("stream created without subjects covering the topic:\n%s", out)
	}
	runUntil(t, "relay started", relay("--topic", "probe.{aggregate_type}.{event_type}")...)
	// A stream named on purpose that does not capture the topic.
	out, code := run(t, nil, relay("--topic", "other.{event_type}", "--nats-stream", "TXBOX")...)
	if code != 2 || !strings.Contains(out, `stream "TXBOX" (subjects probe.>) does not capture subject "other.OrderPlaced" of --topic`) {
		t.Fatalf("stream that does not capture the topic: exit %d\n%s", code, out)
	}
}
