package main_test

import (
	"regexp"
	"strings"
	"testing"
)

// goField is a library field name in an operator's message.
var goField = regexp.MustCompile(`\b(BatchSize|Workers|PollInterval|IdlePollMax|Lease|PublishTimeout|MaxAttempts|BackoffBase|BackoffMax|OutageProbeMax|MaxPendingAge|StallAfter|MetricsInterval|Options\.\w+|Tables\.\w+)\b`)

// Validation errors name the flag and its variable, never a Go field; 0 or
// an empty value is refused where it makes no sense instead of silently
// meaning the default.
func TestValidationNamesFlagsAndRefusesZero(t *testing.T) {
	relay := []string{"relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1"}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--batch-size", "-1"}, "--batch-size (TXBOX_BATCH_SIZE): -1 is outside 1..10000"},
		{[]string{"TXBOX_BATCH_SIZE=-1"}, nil, "--batch-size (TXBOX_BATCH_SIZE): -1 is outside 1..10000"},
		{nil, []string{"--batch-size", "0"}, "--batch-size (TXBOX_BATCH_SIZE)"},
		{nil, []string{"--workers", "0"}, "--workers (TXBOX_WORKERS)"},
		{nil, []string{"--max-attempts", "0"}, "--max-attempts (TXBOX_MAX_ATTEMPTS)"},
		{nil, []string{"--lease", "0s"}, "--lease (TXBOX_LEASE)"},
		{nil, []string{"--poll-interval", "0"}, "--poll-interval (TXBOX_POLL_INTERVAL)"},
		{nil, []string{"--idle-poll-max", "10ms"}, "--idle-poll-max (TXBOX_IDLE_POLL_MAX): 10ms is below --poll-interval 50ms"},
		{[]string{"TXBOX_IDLE_POLL_MAX=1s"}, []string{"--poll-interval", "2s"}, "--idle-poll-max (TXBOX_IDLE_POLL_MAX): 1s is below --poll-interval 2s"},
		{nil, []string{"--topic", ""}, "--topic (TXBOX_TOPIC)"},
		{[]string{"TXBOX_TOPIC="}, nil, "--topic (TXBOX_TOPIC)"},
		{nil, []string{"--lease", "1s", "--publish-timeout", "900ms"}, "--publish-timeout (TXBOX_PUBLISH_TIMEOUT): 900ms must be positive and at most half of --lease"},
		{nil, []string{"--backoff-base", "2s", "--backoff-max", "1s"}, "--backoff-max (TXBOX_BACKOFF_MAX)"},
		{nil, []string{"--outage-probe-max", "5ms"}, "--outage-probe-max (TXBOX_OUTAGE_PROBE_MAX): 5ms is below 10ms"},
		{[]string{"TXBOX_OUTAGE_PROBE_MAX=0"}, nil, "--outage-probe-max (TXBOX_OUTAGE_PROBE_MAX)"},
		{[]string{"TXBOX_FAIL_FAST=maybe"}, nil, "--fail-fast (TXBOX_FAIL_FAST)"},
		{nil, []string{"--claims", "maybe"}, "--claims (TXBOX_CLAIMS)"},
		{nil, []string{"--schema", "a-b"}, "--schema (TXBOX_SCHEMA)"},
		// Checked at start, before anything connects (--fail-fast: a value
		// not checked there would leave the relay waiting for the database).
		{nil, []string{"--fail-fast", "--max-pending-age", "-1s"}, "--max-pending-age (TXBOX_MAX_PENDING_AGE): -1s is negative"},
		{nil, []string{"--fail-fast", "--stall-after", "-1s"}, "--stall-after (TXBOX_STALL_AFTER): -1s is negative"},
		{nil, []string{"--fail-fast", "--metrics-interval", "1ms"}, "--metrics-interval (TXBOX_METRICS_INTERVAL): 1ms is below 10ms"},
		{nil, []string{"--fail-fast", "--metrics-interval", "0"}, "--metrics-interval (TXBOX_METRICS_INTERVAL)"},
		{nil, []string{"--fail-fast", "--broker", "kafka://127.0.0.1:1", "--kafka-partitions", "-3"}, "--kafka-partitions (TXBOX_KAFKA_PARTITIONS)"},
		{[]string{"TXBOX_KAFKA_REPLICATION_FACTOR=-1"}, []string{"--fail-fast", "--broker", "kafka://127.0.0.1:1"}, "--kafka-replication-factor (TXBOX_KAFKA_REPLICATION_FACTOR)"},
		{nil, []string{"--fail-fast", "--broker", "mqtt://127.0.0.1:1", "--mqtt-max-payload", "-1"}, "--mqtt-max-payload (TXBOX_MQTT_MAX_PAYLOAD)"},
		{nil, []string{"--fail-fast", "--broker", "redis://127.0.0.1:1", "--redis-maxlen", "-5"}, "--redis-maxlen (TXBOX_REDIS_MAXLEN)"},
		{[]string{"TXBOX_WEBHOOK_SECRET=0123456789abcdef0123"}, []string{"--fail-fast", "--broker", "http://127.0.0.1:1/in", "--webhook-max-in-flight", "0"}, "--webhook-max-in-flight (TXBOX_WEBHOOK_MAX_IN_FLIGHT)"},
		{nil, []string{"--fail-fast", "--mode", "cdc", "--slot", "s1", "--slot-lag-warn", "-1"}, "--slot-lag-warn (TXBOX_SLOT_LAG_WARN)"},
		// Refused before /metrics is served.
		{nil, []string{"--fail-fast", "--wakeup", "push", "--metrics-addr", "127.0.0.1:0"}, "--wakeup (TXBOX_WAKEUP)"},
	} {
		args := append(append([]string{}, relay...), c.args...)
		out, code := run(t, c.env, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.want) || goField.MatchString(out) {
			t.Fatalf("txbox %v (env %v): exit %d, want 2 and one line with %q and no Go field name; got:\n%s", c.args, c.env, code, c.want, out)
		}
	}
}
