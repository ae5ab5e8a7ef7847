package inbox_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/prom"
)

// A service that embeds a consumer shows its inbox metrics on its own
// /metrics: give the consumer the registry the service serves. (The broker
// here is the in-memory one; a service would use natsbroker or another.)
func Example_consumerMetrics() {
	ctx := context.Background()
	tables := store.Tables{Outbox: "example_metrics_outbox", Inbox: "example_metrics_inbox"}
	s, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.Options{Tables: tables})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	b := membroker.New(membroker.Options{})
	_ = b.Publish(ctx, []broker.Message{{Event: txbox.MustEvent("Order", "o1", "OrderCreated", nil), Topic: "orders"}})

	// The service's registry (prometheus.DefaultRegisterer works too).
	reg := prometheus.NewRegistry()
	c, err := inbox.New(s, inbox.Config{
		Name:       "billing",
		Subscriber: b.Subscribe("billing", "orders"),
		Metrics:    prom.NewInboxMetrics(reg),
	}, func(ctx context.Context, tx pgx.Tx, e txbox.Event) error { return nil })
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	go func() { _ = c.Run(runCtx) }()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // the service's /metrics
	defer srv.Close()
	for runCtx.Err() == nil {
		if line := scrapeLine(srv.URL, "txbox_inbox_processed_total"); strings.HasSuffix(line, " 1") {
			fmt.Println(line)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = s.Pool().Exec(ctx, `DELETE FROM `+tables.Inbox)
}

// The example needs PostgreSQL, so it has no Output line: this test runs
// it where the database is (skipping, or failing under
// TXBOX_REQUIRE_SERVICES=1, where it is not) and checks what it printed.
func TestExampleConsumerMetrics(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.URL(t, "TXBOX_TEST_POSTGRES"))
	testenv.CheckExample(t, Example_consumerMetrics, `txbox_inbox_processed_total{consumer="billing"} 1`)
}

// scrapeLine returns the first line of the scrape at url starting with name.
func scrapeLine(url, name string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name) {
			return line
		}
	}
	return ""
}
