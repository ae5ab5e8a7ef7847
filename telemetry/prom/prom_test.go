package prom

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// The relay's gauges and totals read the state when scraped; the hook's
// calls land in the histograms and counters; the metrics pass the linter.
func TestRelayMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRelayMetrics(reg)
	st := relay.Stats{Published: 7, Dead: 1, Backlog: store.Backlog{Pending: 3, OldestAge: 1500 * time.Millisecond},
		SampledAt: time.Unix(100, 500_000_000), BrokerUp: true, DestinationsDown: 2}
	m.Attach(func() relay.Stats { return st })
	m.Claimed(time.Millisecond, 5, nil)
	m.Claimed(time.Millisecond, 0, errors.New("down"))
	m.Confirmed(time.Second)
	m.PublishRound(time.Millisecond)
	m.BatchStarted()
	m.BatchStarted()
	m.BatchDone(true)
	m.Woke(relay.WokeByListen)
	m.BacklogSampled(errors.New("x"))
	m.BacklogSampled(nil)
	want := `
# HELP txbox_outbox_backlog Rows still to deliver, by status, sampled from the database.
# TYPE txbox_outbox_backlog gauge
txbox_outbox_backlog{status="pending"} 3
txbox_outbox_backlog{status="processing"} 0
txbox_outbox_backlog{status="retry"} 0
# HELP txbox_outbox_last_sample_timestamp_seconds When the backlog was last sampled successfully (unix time).
# TYPE txbox_outbox_last_sample_timestamp_seconds gauge
txbox_outbox_last_sample_timestamp_seconds 100.5
# HELP txbox_outbox_oldest_pending_age_seconds Age of the oldest PENDING, RETRY or PROCESSING row (0 when none), sampled from the database.
# TYPE txbox_outbox_oldest_pending_age_seconds gauge
txbox_outbox_oldest_pending_age_seconds 1.5
# HELP txbox_outbox_sample_errors_total Backlog samples that failed.
# TYPE txbox_outbox_sample_errors_total counter
txbox_outbox_sample_errors_total 1
# HELP txbox_relay_batches_in_flight Claimed batches being published or marked.
# TYPE txbox_relay_batches_in_flight gauge
txbox_relay_batches_in_flight 1
# HELP txbox_relay_broker_up 1 while the broker takes publishes; 0 until the first publish or ping succeeded, and during a broker outage (a publish round that confirmed nothing and failed for the way out, or a failed ping of an idle relay's broker) until a publish is confirmed again.
# TYPE txbox_relay_broker_up gauge
txbox_relay_broker_up 1
# HELP txbox_relay_claim_failures_total Claims that failed (database errors).
# TYPE txbox_relay_claim_failures_total counter
txbox_relay_claim_failures_total 1
# HELP txbox_relay_destinations_down Destinations (rendered topics) refusing publishes for an outage of their own (no stream for the subject) while the broker takes others; their events wait without spending attempts.
# TYPE txbox_relay_destinations_down gauge
txbox_relay_destinations_down 2
# HELP txbox_relay_last_publish_timestamp_seconds When the broker last confirmed a message (unix time; 0: not yet).
# TYPE txbox_relay_last_publish_timestamp_seconds gauge
txbox_relay_last_publish_timestamp_seconds 0
# HELP txbox_relay_mark_failures_total Batches whose marks failed; their rows are delivered again.
# TYPE txbox_relay_mark_failures_total counter
txbox_relay_mark_failures_total 1
# HELP txbox_relay_published_total Publish outcomes: delivered (the broker confirmed), retried (row to RETRY, an attempt spent), deferred (row to RETRY for an outage of the way out, no attempt spent), dead (row to DEAD), held (row held behind a DEAD event of its aggregate: --dead-blocks).
# TYPE txbox_relay_published_total counter
txbox_relay_published_total{outcome="dead"} 1
txbox_relay_published_total{outcome="deferred"} 0
txbox_relay_published_total{outcome="delivered"} 7
txbox_relay_published_total{outcome="held"} 0
txbox_relay_published_total{outcome="retried"} 0
# HELP txbox_relay_wakeups_total Waits after a short claim ended, by source: listen (a push wake-up), poll (the poll interval) or batch (one of the relay's own batches ended, freeing its aggregates).
# TYPE txbox_relay_wakeups_total counter
txbox_relay_wakeups_total{source="batch"} 0
txbox_relay_wakeups_total{source="listen"} 1
txbox_relay_wakeups_total{source="poll"} 0
`
	names := []string{"txbox_outbox_backlog", "txbox_outbox_last_sample_timestamp_seconds", "txbox_outbox_oldest_pending_age_seconds",
		"txbox_outbox_sample_errors_total", "txbox_relay_batches_in_flight", "txbox_relay_broker_up", "txbox_relay_claim_failures_total",
		"txbox_relay_destinations_down", "txbox_relay_last_publish_timestamp_seconds", "txbox_relay_mark_failures_total",
		"txbox_relay_published_total", "txbox_relay_wakeups_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"txbox_relay_claim_seconds": 2, "txbox_relay_claim_rows": 1, "txbox_relay_commit_to_publish_seconds": 1, "txbox_relay_publish_round_seconds": 1} {
		if got := histCount(t, reg, name); got != n {
			t.Errorf("%s: %d observations, want %d", name, got, n)
		}
	}
	if lint, err := testutil.GatherAndLint(reg); err != nil || len(lint) > 0 {
		t.Fatalf("lint: %v %v", err, lint)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Attach did not panic")
		}
	}()
	m.Attach(func() relay.Stats { return st })
}

// A consumer's metrics carry its name; one InboxMetrics serves one
// consumer, and two on one registry are told apart by the label.
func TestInboxMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewInboxMetrics(reg), NewInboxMetrics(reg)
	a.Attach("billing", func() inbox.Stats { return inbox.Stats{Processed: 4, DatabaseUp: true} })
	b.Attach("shipping", func() inbox.Stats { return inbox.Stats{Held: 2} })
	a.Handled(time.Millisecond, nil)
	a.Handled(time.Millisecond, errors.New("x"))
	b.Transaction(time.Millisecond)
	want := `
# HELP txbox_inbox_database_up 0 from the first failure that met an outage (the consumer's database, or one its handler needs, unavailable) until a delivery sent back for it gets through; else 1.
# TYPE txbox_inbox_database_up gauge
txbox_inbox_database_up{consumer="billing"} 1
txbox_inbox_database_up{consumer="shipping"} 0
# HELP txbox_inbox_held_total Ordered: events held back to wait for their predecessor.
# TYPE txbox_inbox_held_total counter
txbox_inbox_held_total{consumer="billing"} 0
txbox_inbox_held_total{consumer="shipping"} 2
# HELP txbox_inbox_processed_total Events whose handler ran and committed.
# TYPE txbox_inbox_processed_total counter
txbox_inbox_processed_total{consumer="billing"} 4
txbox_inbox_processed_total{consumer="shipping"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "txbox_inbox_database_up", "txbox_inbox_held_total", "txbox_inbox_processed_total"); err != nil {
		t.Fatal(err)
	}
	if got := histCount(t, reg, "txbox_inbox_handler_seconds"); got != 2 {
		t.Errorf("handler observations %d, want 2", got)
	}
	if got := histCount(t, reg, "txbox_inbox_transaction_seconds"); got != 1 {
		t.Errorf("transaction observations %d, want 1", got)
	}
	if lint, err := testutil.GatherAndLint(reg); err != nil || len(lint) > 0 {
		t.Fatalf("lint: %v %v", err, lint)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Attach did not panic")
		}
	}()
	a.Attach("other", func() inbox.Stats { return inbox.Stats{} })
}

// histCount sums the observations of the histograms named name.
func histCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n
}
