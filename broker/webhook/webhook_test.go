package webhookbroker_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	webhookbroker "github.com/txbox/txbox/broker/webhook"
	"github.com/txbox/txbox/internal/testenv"
)

const secret = "test-secret-0123456789abcdef"

// endpoint is an HTTP server on a fixed 127.0.0.1 port that can be stopped
// and started again: "/hooks/<topic>" goes to the Receiver subscribed to
// that topic, is answered 204 when there is none (like a topic nobody
// subscribed to), and 404 for a topic marked missing (no hook there yet).
type endpoint struct {
	*testenv.HTTPServer
	mu        sync.Mutex
	receivers map[string]*webhookbroker.Receiver
	missing   map[string]bool
	requests  atomic.Int64
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{receivers: map[string]*webhookbroker.Receiver{}, missing: map[string]bool{}}
	e.HTTPServer = testenv.StartHTTP(t, e)
	return e
}

func (e *endpoint) URL() string { return e.HTTPServer.URL() + "/hooks" }

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	topic := strings.TrimPrefix(r.URL.Path, "/hooks/")
	e.mu.Lock()
	rc, missing := e.receivers[topic], e.missing[topic]
	e.mu.Unlock()
	if missing {
		http.Error(w, `{"error":"no such hook"}`, http.StatusNotFound)
		return
	}
	if rc == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc.ServeHTTP(w, r)
}

func (e *endpoint) subscribe(t *testing.T, topic string) *webhookbroker.Receiver {
	rc, err := webhookbroker.NewReceiver(webhookbroker.ReceiverOptions{Secrets: []string{secret}, PathPrefix: "/hooks/", Logger: adaptertest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.receivers[topic] = rc
	e.mu.Unlock()
	t.Cleanup(func() {
		e.mu.Lock()
		delete(e.receivers, topic)
		e.mu.Unlock()
	})
	return rc
}

// signedPost posts body with headers, signed, as a foreign sender.
func signedPost(url string, headers map[string]string, body []byte) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	sign(req, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 10), time.Now(), body)
	return http.DefaultClient.Do(req)
}

func escapeTopic(topic string) string {
	segs := strings.Split(topic, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func sign(req *http.Request, id string, at time.Time, body []byte) {
	key, _ := webhookbroker.Key(secret)
	req.Header.Set(webhookbroker.HeaderID, id)
	req.Header.Set(webhookbroker.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(webhookbroker.HeaderSignature, webhookbroker.Sign(key, id, at, body))
}

// TestConformance runs brokertest against Receivers behind an HTTP server
// of the test's own, which the broker-down case closes and opens again on
// the same port.
func TestConformance(t *testing.T) {
	e := newEndpoint(t)
	var n atomic.Int64
	brokertest.Run(t, brokertest.Harness{
		// A call sends an aggregate's events one after the other, so order
		// holds per aggregate; the endpoint answers for itself (no
		// persistence or dedupe promised); redelivery is the relay's retry
		// of what was not answered 2xx.
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			return brokertest.Capabilities{OrderPerKey: true, Redelivery: true, MaxPayload: p.(*webhookbroker.Publisher).MaxPayload()}
		},
		NewPublisher: adaptertest.NewPublisher(webhookbroker.Open, e.URL(), webhookbroker.Options{Secret: secret, MaxPayload: 64 << 10, AckTimeout: 5 * time.Second, Logger: adaptertest.Quiet}),
		NewSubscriber: func(_ context.Context, t *testing.T, _, topic string) broker.Subscriber {
			return e.subscribe(t, topic)
		},
		Topic:         func(*testing.T) string { return fmt.Sprintf("bt/t%d/Order Créé", n.Add(1)) },
		InvalidTopics: []string{"", "a//b", "../admin", "a/./b", "a/"},
		// A path the endpoint answers 404 (no hook there), until it has one.
		MissingDestination: func(t *testing.T) (string, func(*testing.T)) {
			topic := fmt.Sprintf("missing/t%d", n.Add(1))
			e.mu.Lock()
			e.missing[topic] = true
			e.mu.Unlock()
			return topic, func(*testing.T) {
				e.mu.Lock()
				delete(e.missing, topic)
				e.mu.Unlock()
			}
		},
		StopBroker:  func(*testing.T) { e.Stop() },
		StartBroker: func(t *testing.T) { e.Start(t) },
		Synchronous: true,
		PublishRaw: func(_ context.Context, t *testing.T, topic string, headers map[string]string, body []byte) {
			// The request stays open until the subscriber settles it.
			go func() {
				if resp, err := signedPost(e.URL()+"/"+escapeTopic(topic), headers, body); err == nil {
					resp.Body.Close()
				}
			}()
		},
	})
}
