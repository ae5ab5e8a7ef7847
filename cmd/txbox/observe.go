package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/relay"
)

// obsFlags are the relay's observation settings.
type obsFlags struct {
	metricsAddr     string
	maxPendingAge   time.Duration
	stallAfter      time.Duration
	metricsInterval time.Duration
	longTxWarn      time.Duration
}

func (o *obsFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (empty: off)")
	f.DurationVar(&o.maxPendingAge, "max-pending-age", 5*time.Minute, "/readyz fails while the oldest pending event is older (0: no limit)")
	f.DurationVar(&o.stallAfter, "stall-after", time.Minute, "/readyz fails while events wait and nothing was published for this long (0: no limit)")
	f.DurationVar(&o.metricsInterval, "metrics-interval", 5*time.Second, "how often the backlog gauges are sampled from the database")
	f.DurationVar(&o.longTxWarn, "long-transaction-warn", 5*time.Minute, "warn in the log and in /readyz's answer (which stays 200) while a transaction of the database has been open for longer: it holds back the cleanup of dead rows and slows claims down (PostgreSQL, MySQL/MariaDB with the PROCESS privilege; 0: never)")
}

// listen opens the metrics address before anything else is connected, so a
// bad or taken address fails at start (exit 2) naming the flag.
func (o *obsFlags) listen() (net.Listener, error) {
	if o.metricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, &txbox.ConfigError{Field: "--metrics-addr (TXBOX_METRICS_ADDR)", Reason: err.Error()}
	}
	return ln, nil
}

// prober is what /healthz and /readyz ask: the relay.
type prober interface {
	Alive() error
	Ready(ctx context.Context) error
}

// obsServer serves the metrics and health endpoints. Until the relay
// exists (while the binary waits for its database or broker) they show the
// start-up state: the probes ask it, and /metrics adds its series.
type obsServer struct {
	reg   *prometheus.Registry
	probe atomic.Pointer[prober]
	srv   *http.Server

	// mu orders scrapes against the relay's registration (start), so that
	// a scrape sees the start-up series or the relay's, never neither nor
	// both.
	mu      sync.Mutex
	startup prometheus.Gatherer // nil once the relay's collectors are registered

	// warnings are what a passing /readyz adds (unset: none).
	warnings atomic.Pointer[func() []string]
}

// newRegistry is the binary's registry: Go runtime and process metrics, and
// what the relay registers, labelled with the kinds of store and broker.
func newRegistry(dbURL, brokerURL string) (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, labelled(reg, dbURL, brokerURL)
}

// labelled adds the labels every relay metric carries: the kinds of store
// and broker.
func labelled(reg prometheus.Registerer, dbURL, brokerURL string) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"store": scheme(dbURL), "broker": scheme(brokerURL)}, reg)
}

// scheme is the kind of a store or broker URL: a bounded label value.
func scheme(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "unknown"
	}
	switch s := strings.ToLower(u.Scheme); s {
	case "postgresql", "pgx":
		return "postgres"
	default:
		return s
	}
}

// serveObs serves reg and, until start, the start-up series of startup,
// which also answers the probes until then.
func serveObs(ctx context.Context, ln net.Listener, reg *prometheus.Registry, startup prometheus.Gatherer, p prober, log *slog.Logger) *obsServer {
	o := &obsServer{reg: reg, startup: startup}
	o.set(p)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		o.answer(w, func(p prober) error { return p.Alive() })
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		o.answer(w, func(p prober) error { return p.Ready(ctx) })
	})
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = o.srv.Shutdown(sctx)
	}()
	log.Info("serving /metrics, /healthz, /readyz", "addr", ln.Addr().String())
	return o
}

func (o *obsServer) set(p prober) { o.probe.Store(&p) }

// warnOf makes a passing /readyz add the warnings of r's last sample: a
// transaction of the database open for longer than warn (0: never).
func (o *obsServer) warnOf(r *relay.Relay, warn time.Duration) {
	if o == nil || warn <= 0 {
		return
	}
	f := func() []string {
		h := r.Stats().Horizon
		if h.OldestTransaction <= warn {
			return nil
		}
		return []string{fmt.Sprintf("database: a transaction has been open for %v (%s), holding back the cleanup of dead rows (%d now)",
			h.OldestTransaction.Round(time.Second), h.Holder, h.DeadRows)}
	}
	o.warnings.Store(&f)
}

// Gather is what /metrics serves: the registry, and the start-up series
// until the relay's replace them.
func (o *obsServer) Gather() ([]*dto.MetricFamily, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.startup != nil {
		return prometheus.Gatherers{o.reg, o.startup}.Gather()
	}
	return o.reg.Gather()
}

// startRelay creates the relay with create, which registers its metrics,
// and makes it what /metrics and the probes show in place of the start-up
// state (o nil: no metrics served). Scrapes wait meanwhile, and for one
// readiness check of the new relay, so that the first scrape after the
// start shows the relay's own verdict rather than its gauges' values
// before their first sample.
func startRelay[R prober](ctx context.Context, o *obsServer, create func() (R, error)) (R, error) {
	if o == nil {
		return create()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	r, err := create()
	if err != nil {
		return r, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = r.Ready(rctx)
	cancel()
	o.startup = nil
	o.set(r)
	return r, nil
}

func (o *obsServer) answer(w http.ResponseWriter, check func(prober) error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	p := o.probe.Load()
	if p == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "starting")
		return
	}
	if err := check(*p); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.TrimPrefix(err.Error(), "relay: "))
		return
	}
	fmt.Fprintln(w, "ok")
	if f := o.warnings.Load(); f != nil {
		for _, warn := range (*f)() {
			fmt.Fprintln(w, "warning:", warn)
		}
	}
}

// durationText makes a JSON log print a duration as "1.5s", as the text
// format does, instead of a count of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
