package brokerenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	webhookbroker "github.com/txbox/txbox/broker/webhook"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// Webhook runs each scenario against an HTTP endpoint of its own on
// 127.0.0.1, which the broker-down scenario closes and opens again on the
// same port. The endpoint is webhookbroker.Handler (signature and timestamp
// checked with the shared secret) behind a recorder: Tapped is every
// request, Stored every request it answered 2xx. The poison event type is
// answered 422 by the handler, which the relay takes as permanent; once the
// row is fixed and replayed it is accepted.
//
// The secret reaches `txbox relay` through TXBOX_WEBHOOK_SECRET, as in
// production.
//
// A webhook has no broker that keeps messages for a consumer that comes
// later, which the inbox scenario assumes (it publishes first and consumes
// after). Subscriber therefore stands in for a queueing gateway: it
// forwards every stored request, unchanged (signature included), in order,
// to a webhookbroker.Receiver feeding the inbox, and retries a 503 after its
// Retry-After, as a sender does.
type Webhook struct{}

// WebhookPoisonType is refused by the endpoint.
const WebhookPoisonType = "OrderUnroutable"

var hookQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

type hookEndpoint struct {
	handler http.Handler
	mu      sync.Mutex
	tapped  []scenario.Seen
	stored  []scenario.Seen
	raw     []recorded
	more    chan struct{} // signalled when stored grows
}

func (Webhook) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	secret := hex.EncodeToString(b)
	t.Setenv("TXBOX_WEBHOOK_SECRET", secret)
	prefix := newPrefix()

	e := &hookEndpoint{more: make(chan struct{}, 1)}
	e.handler = webhookbroker.Handler(secret, 0, func(_ context.Context, ev txbox.Event) error {
		if ev.Type == WebhookPoisonType {
			return txbox.Permanent(fmt.Errorf("no route for event type %q", ev.Type))
		}
		return nil
	})
	srv := testenv.StartHTTP(t, e)
	base := srv.URL() + "/hooks"

	return &scenario.Destination{
		URL:   base,
		Topic: prefix + "/{aggregate_type}/{event_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*webhookbroker.Publisher, error) {
				return webhookbroker.Open(ctx, base, webhookbroker.Options{Secret: secret})
			})
		},
		Tapped: func() []scenario.Seen {
			e.mu.Lock()
			defer e.mu.Unlock()
			return append([]scenario.Seen(nil), e.tapped...)
		},
		Stored: func(*testing.T) []scenario.Seen {
			e.mu.Lock()
			defer e.mu.Unlock()
			return append([]scenario.Seen(nil), e.stored...)
		},
		Stop:       srv.Stop,
		Start:      func() { srv.Start(t) },
		PoisonType: WebhookPoisonType,
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			return e.forwardTo(t, secret)
		},
	}
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (e *hookEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	dec := func(name string) string {
		v, _ := url.PathUnescape(r.Header.Get(name))
		return v
	}
	seen := scenario.Seen{EventID: r.Header.Get("ce-id"), AggregateID: dec("ce-subject"), Type: dec("ce-type")}
	e.mu.Lock()
	e.tapped = append(e.tapped, seen)
	e.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	e.handler.ServeHTTP(sw, r)
	if sw.code/100 != 2 {
		return
	}
	e.mu.Lock()
	e.stored = append(e.stored, seen)
	e.raw = append(e.raw, recorded{path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
	e.mu.Unlock()
	select {
	case e.more <- struct{}{}:
	default:
	}
}

// forwardTo returns a Receiver fed, in order, with every request the
// endpoint stored, past and future, until the test ends.
func (e *hookEndpoint) forwardTo(t *testing.T, secret string) broker.Subscriber {
	rc, err := webhookbroker.NewReceiver(webhookbroker.ReceiverOptions{Secrets: []string{secret}, PathPrefix: "/hooks/", Logger: hookQuiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.StartHTTP(t, rc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for next := 0; ctx.Err() == nil; {
			e.mu.Lock()
			var req *recorded
			if next < len(e.raw) {
				req = &e.raw[next]
			}
			e.mu.Unlock()
			if req == nil {
				select {
				case <-e.more:
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
				}
				continue
			}
			wait := forward(ctx, srv.URL()+req.path, req)
			if wait == 0 {
				next++
				continue
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = rc.Close()
		<-done
		srv.Stop()
	})
	return rc
}

// forward sends one recorded request and returns 0 once it was answered
// 2xx, else how long to wait before sending it again.
func forward(ctx context.Context, target string, r *recorded) time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(r.body))
	if err != nil {
		return time.Second
	}
	req.Header = r.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 100 * time.Millisecond
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return 0
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 100 * time.Millisecond
}
