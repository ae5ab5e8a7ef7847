package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/prom"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "promtool (Debian package prometheus; .ci/run installs it)")
	}
	return p
}

// The shipped alert rules load and pass their unit tests.
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	dir := filepath.Join("..", "..", "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(pt, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// A metrics address that cannot be listened on fails at start, exit 2,
// naming the flag, before anything is connected.
func TestMetricsAddrBad(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, addr := range []string{"not-an-address", taken.Addr().String()} {
		out, code := run(t, nil, "relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--metrics-addr", addr)
		if code != 2 || !strings.Contains(out, "--metrics-addr (TXBOX_METRICS_ADDR)") {
			t.Fatalf("--metrics-addr %s: exit %d, output:\n%s", addr, code, out)
		}
	}
	out, code := run(t, []string{"TXBOX_METRICS_ADDR=bad:port:x"}, "relay", "--db", "postgres://127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1")
	if code != 2 || !strings.Contains(out, "TXBOX_METRICS_ADDR") {
		t.Fatalf("TXBOX_METRICS_ADDR: exit %d, output:\n%s", code, out)
	}
}

// `txbox stats` counts inbox rows per consumer and status, in text and JSON.
func TestStatsInbox(t *testing.T) {
	ctx := context.Background()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	tb := s.Tables()
	for i, st := range []string{"PROCESSED", "PROCESSED", "DEAD"} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO `+tb.Qualified(tb.Inbox)+` (event_id, consumer_name, event_type, status) VALUES ($1, 'billing', 'E', $2)`, fmt.Sprint("e", i), st); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"stats", "--db", testenv.URL(t, "TXBOX_TEST_POSTGRES"), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox}
	out, code := run(t, nil, args...)
	if code != 0 || !strings.Contains(out, `inbox "billing": PROCESSING=0 PROCESSED=2 RETRY=0 DEAD=1`) {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, append(args, "--json")...)
	if code != 0 || !regexp.MustCompile(`"billing": \{[^}]*"DEAD": 1,[^}]*"PROCESSED": 2`).MatchString(out) {
		t.Fatalf("stats --json: exit %d\n%s", code, out)
	}
}

type scrape map[string]*dto.MetricFamily

func scrapeURL(t *testing.T, url string) (scrape, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return mfs, body
}

// value is the sum of a family's samples whose labels include want.
func (s scrape) value(name string, want ...string) float64 {
	mf := s[name]
	if mf == nil {
		return -1
	}
	var sum float64
metrics:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			ok := false
			for _, l := range m.GetLabel() {
				ok = ok || l.GetName() == want[i] && l.GetValue() == want[i+1]
			}
			if !ok {
				continue metrics
			}
		}
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		}
	}
	return sum
}

func probe(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRelayMetricsAcceptance is issue 18's acceptance: the built binary
// drains a backlog to NATS while a test scrapes it: the backlog falls to 0,
// the delivered counter matches the events, the oldest age returns to 0;
// /readyz fails while the broker is down longer than --stall-after and
// recovers after. An embedded consumer's registry is scraped too, every
// metric the shipped alerts and dashboard name exists in one of the two,
// and promtool accepts both scrapes.
func TestRelayMetricsAcceptance(t *testing.T) {
	pt := promtool(t)
	ctx := context.Background()
	dest := brokerenv.NATS{}.Setup(t)
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	tb := s.Tables()
	insert := func(from, to int) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `INSERT INTO `+tb.Qualified(tb.Outbox)+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			SELECT 'ev' || g || '-' || $3, 'Order', 'o' || (g % 500), 'Created', '{}' FROM generate_series($1::int, $2::int) g`, from, to, txbox.NewID()[24:]); err != nil {
			t.Fatal(err)
		}
	}
	const n = 20000
	insert(1, n)

	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	base := "http://" + addr
	args := append([]string{"relay", "--db", testenv.URL(t, "TXBOX_TEST_POSTGRES"), "--broker", dest.URL, "--topic", dest.Topic,
		"--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox, "--batch-size", "200", "--workers", "1",
		"--stall-after", "2s", "--max-pending-age", "10m", "--publish-timeout", "1s", "--lease", "4s",
		"--backoff-base", "100ms", "--backoff-max", "500ms", "--max-attempts", "1000", "--log-format", "json",
		"--cleanup-every", "1h"}, dest.Args...) // --cleanup-every: its series exist, for the alerts' check below
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), "TXBOX_METRICS_ADDR="+addr, "TXBOX_METRICS_INTERVAL=50ms")
	logs, exited := testenv.StartLogged(t, cmd)
	t.Cleanup(func() {
		testenv.StopProcess(cmd.Process, os.Interrupt, exited, 10*time.Second)
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	testenv.WaitPort(t, mustPort(t, addr), 20*time.Second)

	// Drain, scraping as it goes.
	var maxBacklog, maxAge float64
	var last scrape
	testenv.WaitFor(t, 60*time.Second, "the backlog to drain", func() bool {
		last, _ = scrapeURL(t, base+"/metrics")
		maxBacklog = max(maxBacklog, last.value("txbox_outbox_backlog"))
		maxAge = max(maxAge, last.value("txbox_outbox_oldest_pending_age_seconds"))
		return last.value("txbox_relay_published_total", "outcome", "delivered") == n &&
			last.value("txbox_outbox_backlog") == 0 && last.value("txbox_outbox_oldest_pending_age_seconds") == 0
	})
	if maxBacklog <= 0 || maxAge <= 0 {
		t.Fatalf("never saw the backlog (max %v) or its age (max %v) while draining", maxBacklog, maxAge)
	}
	if got := last.value("txbox_relay_published_total", "outcome", "dead") + last.value("txbox_relay_published_total", "outcome", "retried"); got != 0 {
		t.Fatalf("dead+retried = %v, want 0", got)
	}
	if v := last.value("txbox_relay_ready", "store", "postgres", "broker", "nats"); v != 1 {
		t.Fatalf("txbox_relay_ready{store=postgres,broker=nats} = %v", v)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := probe(base + p); code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	if !strings.Contains(logs.String(), `"poll":"`+relay.DefaultPollInterval.String()+`"`) {
		t.Fatalf("a JSON log line prints a duration other than as text:\n%s", logs.String())
	}

	// Broker down while idle: the relay's ping notices. Then events wait
	// past --stall-after: ready still fails; the relay stays alive.
	dest.Stop()
	testenv.WaitFor(t, 20*time.Second, "/readyz to fail while idle", func() bool {
		code, body := probe(base + "/readyz")
		return code == 503 && strings.Contains(body, "broker")
	})
	insert(n+1, n+10)
	time.Sleep(2500 * time.Millisecond)
	code, body := probe(base + "/readyz")
	if code != 503 || !strings.Contains(body, "not ready") {
		t.Fatalf("/readyz with the broker down past --stall-after: %d %s", code, body)
	}
	if c, _ := probe(base + "/healthz"); c != 200 {
		t.Fatalf("/healthz failed while only the broker is down: %d", c)
	}
	dest.Start()
	testenv.WaitFor(t, 30*time.Second, "/readyz to recover and the rest to be delivered", func() bool {
		code, _ := probe(base + "/readyz")
		last, _ = scrapeURL(t, base+"/metrics")
		return code == 200 && last.value("txbox_relay_published_total", "outcome", "delivered") == n+10 && last.value("txbox_outbox_backlog") == 0
	})
	relayScrape, relayText := scrapeURL(t, base+"/metrics")

	// An embedded consumer shows its metrics on its own registry.
	reg := prometheus.NewRegistry()
	c, err := inbox.New(s, inbox.Config{Name: "billing", Subscriber: dest.Subscriber(t, "billing"), Metrics: prom.NewInboxMetrics(reg)},
		func(context.Context, pgx.Tx, txbox.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Go(t, c.Run)
	defer stop()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var consumerScrape scrape
	var consumerText []byte
	testenv.WaitFor(t, 30*time.Second, "the consumer to process events", func() bool {
		consumerScrape, consumerText = scrapeURL(t, srv.URL)
		return consumerScrape.value("txbox_inbox_processed_total", "consumer", "billing") > 100
	})

	if h := consumerScrape["txbox_inbox_handler_seconds"]; h == nil || h.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
		t.Fatal("the consumer's handler histogram has no observations")
	}

	// Every metric the alerts and the dashboard use exists.
	names := map[string]bool{"up": true}
	for _, sc := range []scrape{relayScrape, consumerScrape} {
		for k, mf := range sc {
			names[k] = true
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				names[k+"_bucket"], names[k+"_sum"], names[k+"_count"] = true, true, true
			}
		}
	}
	used := 0
	for _, f := range []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/txbox.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\btxbox_[a-z0-9_]+`).FindAllString(string(b), -1) {
			used++
			if !names[m] {
				t.Errorf("%s names %s, which neither the relay nor the consumer exposes", filepath.Base(f), m)
			}
		}
	}
	if used < 20 {
		t.Fatalf("found only %d metric references in the alerts and dashboard", used)
	}
	for name, text := range map[string][]byte{"relay": relayText, "consumer": consumerText} {
		cmd := exec.Command(pt, "check", "metrics")
		cmd.Stdin = bytes.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on the %s scrape: %v\n%s", name, err, out)
		}
	}
}

func mustPort(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
