package webhookbroker_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	webhookbroker "github.com/txbox/txbox/broker/webhook"
)

func open(t *testing.T, base string, opts webhookbroker.Options) *webhookbroker.Publisher {
	t.Helper()
	opts.Secret = cmp.Or(opts.Secret, secret)
	return adaptertest.Open(t, webhookbroker.Open, base, opts)
}

// The Standard Webhooks specification's test vector: receivers using its
// libraries verify what the publisher signs.
func TestSignMatchesStandardWebhooksVector(t *testing.T) {
	key, err := webhookbroker.Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhookbroker.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	for _, bad := range []string{"", "short", "whsec_!!!", "whsec_c2hvcnQ="} {
		if _, err := webhookbroker.Key(bad); err == nil || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Errorf("Key(%q) = %v, want an error that does not repeat the secret", bad, err)
		}
	}
}

func TestTarget(t *testing.T) {
	cases := []struct{ base, topic, want string }{
		{"http://h/in", "billing/InvoiceIssued", "http://h/in/billing/InvoiceIssued"},
		{"http://h/in/", "a b/ü?#", "http://h/in/a%20b/%C3%BC%3F%23"},
		{"https://h:8443", "x", "https://h:8443/x"},
		{"https://h/hooks/{topic}/events?v=2", "Order.Created", "https://h/hooks/Order.Created/events?v=2"},
		{"https://user:pw@h/in", "x", "https://h/in/x"},
	}
	for _, c := range cases {
		p := open(t, c.base, webhookbroker.Options{})
		got, err := p.Target(c.topic)
		if err != nil || got != c.want {
			t.Errorf("Target(%q) under %s = %q, %v; want %q", c.topic, c.base, got, err, c.want)
		}
	}
	for _, bad := range []string{"ftp://h", "http://", "http://h/{topic}/{topic}", "http://h?x={topic}", "http://h/#frag", "://x"} {
		if _, err := webhookbroker.Open(context.Background(), bad, webhookbroker.Options{Secret: secret}); !errors.Is(err, txbox.ErrConfig) {
			t.Errorf("Open(%q) = %v, want a config error", bad, err)
		}
	}
	if _, err := webhookbroker.Open(context.Background(), "http://h", webhookbroker.Options{}); !errors.Is(err, txbox.ErrConfig) || !strings.Contains(err.Error(), "secret") {
		t.Errorf("Open without a secret = %v, want a config error naming the secret", err)
	}
}

// TestAnswersClassified: how each kind of answer lands in the relay's
// bookkeeping, with the status and body in the error text. An answer about
// the endpoint (down, overloaded, missing, refusing the credentials, moved,
// silent) is an outage: no attempt spent. An answer about the event (a 4xx
// other than those) sends it to DEAD at once.
func TestAnswersClassified(t *testing.T) {
	// The endpoint's plain error answers, by path; Retry-After when set.
	answers := map[string]struct {
		status     int
		body       string
		retryAfter string
	}{
		"/bad":           {http.StatusBadRequest, `{"error":"unknown field \"qty\""}`, ""},
		"/slow-down":     {http.StatusTooManyRequests, "rate limited", "30"},
		"/timeout408":    {http.StatusRequestTimeout, "", ""},
		"/broken":        {http.StatusInternalServerError, strings.Repeat("stack trace line\n", 100), ""},
		"/unauthorized":  {http.StatusUnauthorized, "signature: no matching signature", ""},
		"/forbidden":     {http.StatusForbidden, "forbidden", ""},
		"/maintenance":   {http.StatusServiceUnavailable, "down for maintenance", "120"},
		"/gateway":       {http.StatusBadGateway, "upstream unreachable", ""},
		"/not-post":      {http.StatusMethodNotAllowed, "webhooks are POSTed", ""},
		"/too-large":     {http.StatusRequestEntityTooLarge, "body over 1024 bytes", ""},
		"/media":         {http.StatusUnsupportedMediaType, "want application/json", ""},
		"/unprocessable": {http.StatusUnprocessableEntity, "no such product", ""},
		"/conflict":      {http.StatusConflict, "order already shipped", ""},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, plain := answers[r.URL.Path]
		switch {
		case plain:
			if a.retryAfter != "" {
				w.Header().Set("Retry-After", a.retryAfter)
			}
			http.Error(w, a.body, a.status)
		case r.URL.Path == "/ok":
			w.WriteHeader(http.StatusAccepted)
		case r.URL.Path == "/moved":
			http.Redirect(w, r, "https://elsewhere.example/new", http.StatusMovedPermanently)
		case r.URL.Path == "/hang":
			time.Sleep(700 * time.Millisecond)
		default:
			http.Error(w, "no such hook", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	p := open(t, srv.URL, webhookbroker.Options{AckTimeout: 300 * time.Millisecond})
	type want struct {
		topic                  string
		permanent, unavailable bool
		text                   string
	}
	wants := []want{
		{topic: "ok"},
		{"bad", true, false, `400 Bad Request: {"error":"unknown field \"qty\""}`},
		{"too-large", true, false, "413 Request Entity Too Large: body over 1024 bytes"},
		{"media", true, false, "415 Unsupported Media Type"},
		{"unprocessable", true, false, "422 Unprocessable Entity: no such product"},
		{"conflict", true, false, "409 Conflict"},
		{"slow-down", false, true, "429 Too Many Requests, Retry-After 30: rate limited"},
		{"timeout408", false, true, "408 Request Timeout"},
		{"broken", false, true, "500 Internal Server Error: stack trace line stack trace line"},
		{"maintenance", false, true, "503 Service Unavailable, Retry-After 120: down for maintenance"},
		{"gateway", false, true, "502 Bad Gateway"},
		{"unauthorized", false, true, "401 Unauthorized"},
		{"forbidden", false, true, "403 Forbidden"},
		{"no-such-hook", false, true, "404 Not Found: no such hook"},
		{"not-post", false, true, "405 Method Not Allowed"},
		{"moved", false, true, "Location https://elsewhere.example/new"},
		{"hang", false, true, "timed out"},
	}
	var msgs []broker.Message
	for i, w := range wants {
		msgs = append(msgs, adaptertest.Msg(w.topic, "k"+strconv.Itoa(i), i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	for i, w := range wants {
		err := errs[i]
		switch {
		case w.text == "" && err != nil:
			t.Errorf("%s: %v, want delivered", w.topic, err)
		case w.text == "":
		case err == nil:
			t.Errorf("%s: delivered, want an error", w.topic)
		case errors.Is(err, txbox.ErrPermanent) != w.permanent,
			errors.Is(err, txbox.ErrBrokerUnavailable) != w.unavailable,
			!strings.Contains(err.Error(), w.text):
			t.Errorf("%s: %v; want permanent=%v unavailable=%v, mentioning %q", w.topic, err, w.permanent, w.unavailable, w.text)
		}
		if err != nil && len(err.Error()) > 800 {
			t.Errorf("%s: error text of %d bytes; the body must be cut", w.topic, len(err.Error()))
		}
	}
}

// TestLaneOrder: events of one aggregate in one call go one at a time, in
// order; after a retryable failure the rest of that aggregate is held back;
// other aggregates go concurrently and are unaffected; MaxInFlight bounds
// the requests open at once.
func TestLaneOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var open_, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := open_.Add(1)
		defer open_.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("ce-subject")+string(body))
		mu.Unlock()
		if bytes.Contains(body, []byte(`"n":1}`)) && r.Header.Get("ce-subject") == "fail" {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := open(t, srv.URL, webhookbroker.Options{MaxInFlight: 3})
	var msgs []broker.Message
	for i := range 4 {
		for _, k := range []string{"a", "b", "c", "d", "fail"} {
			msgs = append(msgs, adaptertest.Msg("x", k, i))
		}
	}
	errs := p.Publish(context.Background(), msgs)
	for i, m := range msgs {
		n := i / 5
		switch {
		case m.Event.AggregateID != "fail" || n == 0:
			if errs[i] != nil {
				t.Errorf("%s #%d: %v", m.Event.AggregateID, n, errs[i])
			}
		case n == 1:
			if errs[i] == nil || errors.Is(errs[i], txbox.ErrPermanent) {
				t.Errorf("fail #1: %v, want retryable", errs[i])
			}
		default:
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "not sent") || !strings.Contains(errs[i].Error(), "down for maintenance") {
				t.Errorf("fail #%d: %v, want held back with the cause", n, errs[i])
			}
		}
	}
	last := map[string]int{}
	for _, g := range got {
		k, body, _ := strings.Cut(g, "{")
		var v struct{ N int }
		if err := json.Unmarshal([]byte("{"+body), &v); err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[k]; ok && v.N <= prev {
			t.Fatalf("aggregate %s: #%d after #%d", k, v.N, prev)
		}
		last[k] = v.N
	}
	if len(got) != 4*4+2 {
		t.Errorf("%d requests, want 18 (the failing aggregate stops after its 2nd)", len(got))
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d requests open at once, want 2..3 (MaxInFlight 3)", m)
	}
}

// TestHeadersAndBody: what an endpoint sees.
func TestHeadersAndBody(t *testing.T) {
	var req *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, body = r, must(io.ReadAll(r.Body))
	}))
	defer srv.Close()
	p := open(t, strings.Replace(srv.URL, "http://", "http://hook:pa55word@", 1), webhookbroker.Options{})
	m := adaptertest.Msg("billing/Invoice", "inv \"7\" 100%", 1)
	m.Event.Headers = map[string]string{"traceparent": adaptertest.TraceParent}
	if err := p.Publish(context.Background(), []broker.Message{m})[0]; err != nil {
		t.Fatal(err)
	}
	h := req.Header
	checks := map[string]string{
		"Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": m.Event.ID, "ce-type": "Created",
		"ce-source": "test", "ce-subject": "inv%20%227%22%20100%25", "ce-aggregatetype": "Order",
		"ce-traceparent": m.Event.Headers["traceparent"], "webhook-id": m.Event.ID,
	}
	for k, v := range checks {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h.Get("ce-datacontenttype") != "" {
		t.Error("ce-datacontenttype sent; the HTTP binding maps it to Content-Type")
	}
	if u, pw, ok := req.BasicAuth(); !ok || u != "hook" || pw != "pa55word" {
		t.Errorf("basic auth %q %q %v", u, pw, ok)
	}
	if req.URL.Path != "/billing/Invoice" || !bytes.Equal(body, m.Event.Payload) {
		t.Errorf("path %s body %s", req.URL.Path, body)
	}
	key, _ := webhookbroker.Key(secret)
	ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if want := webhookbroker.Sign(key, m.Event.ID, time.Unix(ts, 0), body); h.Get("webhook-signature") != want {
		t.Errorf("signature %s, want %s", h.Get("webhook-signature"), want)
	}
}

// roundTripper is an http.RoundTripper from a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientOptions: the caller edits the Publisher's HTTP client after
// txbox made it (here another transport, through which every request goes),
// Name is the User-Agent, and redirects stay off whatever the caller set.
func TestClientOptions(t *testing.T) {
	var agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent = r.UserAgent()
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	var through atomic.Int32
	p := open(t, srv.URL, webhookbroker.Options{Name: "billing-relay", ClientOptions: func(c *http.Client) {
		if c.Transport == nil {
			t.Error("ClientOptions saw no transport: txbox's client comes first")
		}
		c.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
			through.Add(1)
			return http.DefaultTransport.RoundTrip(r)
		})
		c.CheckRedirect = nil // follow redirects: txbox turns them off again
	}})
	errs := p.Publish(context.Background(), []broker.Message{adaptertest.Msg("in", "k", 0), adaptertest.Msg("moved", "k2", 0)})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if agent != "billing-relay" {
		t.Errorf("User-Agent %q, want Options.Name", agent)
	}
	if !errors.Is(errs[1], txbox.ErrBrokerUnavailable) || !strings.Contains(errs[1].Error(), "307") {
		t.Errorf("redirect: %v, want an outage naming the 307 (not followed)", errs[1])
	}
	if n := through.Load(); n != 2 {
		t.Errorf("%d requests through the caller's transport, want 2", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSecretsNeverShown: neither the signing secret nor the URL's password
// is in any error.
func TestSecretsNeverShown(t *testing.T) {
	p := open(t, "http://user:pa55word@127.0.0.1:1/in", webhookbroker.Options{AckTimeout: time.Second})
	err := p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "k", 0)})[0]
	if !errors.Is(err, txbox.ErrBrokerUnavailable) || strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), secret) {
		t.Fatalf("err = %v", err)
	}
	_, err = webhookbroker.Open(context.Background(), "gopher://user:pa55word@h", webhookbroker.Options{Secret: secret})
	if err == nil || strings.Contains(err.Error(), "pa55word") {
		t.Fatalf("err = %v", err)
	}
}
