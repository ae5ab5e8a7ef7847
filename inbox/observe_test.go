package inbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/promtest"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/prom"
)

// A consumer with a registry counts what it processed, absorbed and parked,
// times its handler and transactions, and its log line about a parked
// event names the event.
func TestConsumerMetricsAndLogs(t *testing.T) {
	ctx := context.Background()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	b := membroker.New(membroker.Options{})
	good, bad := txbox.MustEvent("Order", "o1", "Created", nil), txbox.MustEvent("Order", "o2", "Broken", nil)
	_ = b.Publish(ctx, []broker.Message{{Event: good, Topic: "t"}, {Event: good, Topic: "t"}, {Event: bad, Topic: "t"}})
	reg := prometheus.NewRegistry()
	var logs testenv.SyncBuffer
	c, err := inbox.New(s, inbox.Config{Name: "billing", Subscriber: b.Subscribe("billing", "t"),
		Metrics: prom.NewInboxMetrics(reg), MaxAttempts: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		func(_ context.Context, _ pgx.Tx, e txbox.Event) error {
			if e.Type == "Broken" {
				return errors.New("cannot apply")
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Go(t, c.Run)
	defer stop()
	count := func(name string) float64 { return promtest.Value(t, reg, name) }
	deadline := time.Now().Add(10 * time.Second)
	for count("txbox_inbox_parked_total") < 1 || count("txbox_inbox_processed_total")+count("txbox_inbox_duplicates_total") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p, d, f := count("txbox_inbox_processed_total"), count("txbox_inbox_duplicates_total"), count("txbox_inbox_failed_total"); p != 1 || d != 1 || f != 1 {
		t.Fatalf("processed %v duplicates %v failed %v, want 1 1 1", p, d, f)
	}
	n, err := testutil.GatherAndCount(reg, "txbox_inbox_handler_seconds", "txbox_inbox_transaction_seconds")
	if err != nil || n != 2 {
		t.Fatalf("histograms: %d %v", n, err)
	}
	for _, kv := range []string{`"msg":"event parked after its last attempt"`, `"event_id":"` + bad.ID + `"`, `"aggregate_type":"Order"`, `"aggregate_id":"o2"`, `"event_type":"Broken"`, `"consumer":"billing"`} {
		if !strings.Contains(logs.String(), kv) {
			t.Fatalf("log lacks %s:\n%s", kv, logs.String())
		}
	}
}
