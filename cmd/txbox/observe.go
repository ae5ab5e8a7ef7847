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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
)

// obsFlags are the relay's observation settings.
type obsFlags struct {
	metricsAddr     string
	maxPendingAge   time.Duration
	stallAfter      time.Duration
	metricsInterval time.Duration
}

func (o *obsFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (empty: off)")
	f.DurationVar(&o.maxPendingAge, "max-pending-age", 5*time.Minute, "/readyz fails while the oldest pending event is older (0: no limit)")
	f.DurationVar(&o.stallAfter, "stall-after", time.Minute, "/readyz fails while events wait and nothing was published for this long (0: no limit)")
	f.DurationVar(&o.metricsInterval, "metrics-interval", 5*time.Second, "how often the backlog gauges are sampled from the database")
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

// obsServer serves the metrics and health endpoints; the probes answer 503
// "starting" until the relay exists (while the binary waits for a broker).
type obsServer struct {
	reg   *prometheus.Registry
	probe atomic.Pointer[prober]
	srv   *http.Server
}

// newRegistry is the binary's registry: Go runtime and process metrics, and
// what the relay registers, labelled with the kinds of store and broker.
func newRegistry(dbURL, brokerURL string) (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	labels := prometheus.Labels{"store": scheme(dbURL), "broker": scheme(brokerURL)}
	return reg, prometheus.WrapRegistererWith(labels, reg)
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

func serveObs(ctx context.Context, ln net.Listener, reg *prometheus.Registry, log *slog.Logger) *obsServer {
	o := &obsServer{reg: reg}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
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
}

// durationText makes a JSON log print a duration as "1.5s", as the text
// format does, instead of a count of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
