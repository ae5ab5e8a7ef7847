package webhookbroker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	webhookbroker "github.com/txbox/txbox/broker/webhook"
)

func receiver(t *testing.T, opts webhookbroker.ReceiverOptions) (*webhookbroker.Receiver, *httptest.Server) {
	t.Helper()
	if opts.Secrets == nil {
		opts.Secrets = []string{secret}
	}
	opts.Logger = adaptertest.Quiet
	rc, err := webhookbroker.NewReceiver(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	t.Cleanup(func() { rc.Close(); srv.Close() })
	return rc, srv
}

// TestReceiverRefuses: what never becomes a delivery, and the answer the
// sender gets for it.
func TestReceiverRefuses(t *testing.T) {
	rc, srv := receiver(t, webhookbroker.ReceiverOptions{MaxPayload: 100})
	body := []byte(`{"n":1}`)
	post := func(mutate func(*http.Request)) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", bytes.NewReader(body))
		req.Header.Set("ce-specversion", "1.0")
		sign(req, "id-1", time.Now(), body)
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	key, _ := webhookbroker.Key(secret)
	cases := map[string]struct {
		mutate func(*http.Request)
		code   int
	}{
		"no signature":   {func(r *http.Request) { r.Header.Del(webhookbroker.HeaderSignature) }, 401},
		"other body":     {func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"n":2}`)); r.ContentLength = 7 }, 401},
		"other id":       {func(r *http.Request) { r.Header.Set(webhookbroker.HeaderID, "id-2") }, 401},
		"wrong secret":   {func(r *http.Request) { sign2(r, []byte("another-secret-0123456789"), "id-1", time.Now(), body) }, 401},
		"replayed later": {func(r *http.Request) { sign2(r, key, "id-1", time.Now().Add(-6*time.Minute), body) }, 401},
		"from the future": {func(r *http.Request) {
			sign2(r, key, "id-1", time.Now().Add(6*time.Minute), body)
		}, 401},
		"GET": {func(r *http.Request) { r.Method = http.MethodGet }, 405},
		"too big": {func(r *http.Request) {
			big := bytes.Repeat([]byte("x"), 200)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(big)), 200
			sign(r, "id-1", time.Now(), big)
		}, 413},
	}
	for name, c := range cases {
		if got := post(c.mutate); got != c.code {
			t.Errorf("%s: answered %d, want %d", name, got, c.code)
		}
	}
	adaptertest.Silent(t, rc, 200*time.Millisecond, "refused requests must not be delivered")
}

func sign2(req *http.Request, key []byte, id string, at time.Time, body []byte) {
	req.Header.Set(webhookbroker.HeaderID, id)
	req.Header.Set(webhookbroker.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(webhookbroker.HeaderSignature, webhookbroker.Sign(key, id, at, body))
}

// TestReceiverRotation: during a secret rotation both secrets verify.
func TestReceiverRotation(t *testing.T) {
	old := "old-secret-0123456789abcdef"
	rc, srv := receiver(t, webhookbroker.ReceiverOptions{Secrets: []string{secret, old}})
	p := open(t, srv.URL, webhookbroker.Options{Secret: old})
	done := make(chan error, 1)
	go func() { done <- p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "k", 0)})[0] }()
	ds, err := rc.Receive(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestReceiverSenderGone: a sender that gives up voids its delivery: it is
// not handed out, or its settling fails as unavailable, and the retry
// brings the event again.
func TestReceiverSenderGone(t *testing.T) {
	rc, srv := receiver(t, webhookbroker.ReceiverOptions{})
	p := open(t, srv.URL, webhookbroker.Options{AckTimeout: 200 * time.Millisecond})
	err := p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "k", 0)})[0]
	if !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Fatalf("unanswered request: %v, want unavailable", err)
	}
	time.Sleep(50 * time.Millisecond)
	adaptertest.Silent(t, rc, 200*time.Millisecond, "a void delivery must not be handed out")
	go func() { _ = p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "k", 1)}) }()
	ds, err := rc.Receive(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the sender times out meanwhile
	if err := ds[0].Ack(context.Background()); !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Fatalf("Ack after the sender left: %v, want unavailable", err)
	}
}

// TestReceiverClose: open requests are answered 503 and retried.
func TestReceiverClose(t *testing.T) {
	rc, srv := receiver(t, webhookbroker.ReceiverOptions{})
	p := open(t, srv.URL, webhookbroker.Options{})
	done := make(chan error, 1)
	go func() { done <- p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "k", 0)})[0] }()
	if _, err := rc.Receive(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	err := <-done
	if !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("request open at Close: %v, want a 503, an outage of the endpoint", err)
	}
	if _, err := rc.Receive(context.Background(), 1); err == nil {
		t.Fatal("Receive after Close succeeded")
	}
}

// TestHandler: the inbox-less helper's answers.
func TestHandler(t *testing.T) {
	var got []txbox.Event
	h := webhookbroker.Handler(secret, 0, func(_ context.Context, e txbox.Event) error {
		switch e.AggregateID {
		case "poison":
			return txbox.Permanent(fmt.Errorf("no such product %q", "X-1"))
		case "flaky":
			return errors.New("database is restarting")
		}
		got = append(got, e)
		return nil
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	p := open(t, srv.URL, webhookbroker.Options{})
	errs := p.Publish(context.Background(), []broker.Message{adaptertest.Msg("x", "ok", 0), adaptertest.Msg("x", "poison", 1), adaptertest.Msg("x", "flaky", 2)})
	if errs[0] != nil || len(got) != 1 || got[0].AggregateID != "ok" {
		t.Errorf("good event: %v, handled %v", errs[0], got)
	}
	if !errors.Is(errs[1], txbox.ErrPermanent) || !strings.Contains(errs[1].Error(), `422 Unprocessable Entity: no such product "X-1"`) {
		t.Errorf("permanent handler error: %v", errs[1])
	}
	if !errors.Is(errs[2], txbox.ErrBrokerUnavailable) || errors.Is(errs[2], txbox.ErrPermanent) || !strings.Contains(errs[2].Error(), "500") {
		t.Errorf("handler error: %v, want a 500, an outage of the endpoint", errs[2])
	}
	resp, err := signedPost(srv.URL+"/x", map[string]string{"ce-specversion": "1.0"}, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "no id") {
		t.Errorf("undecodable: %d %s, want 400 with the reason", resp.StatusCode, b)
	}
	defer func() {
		if recover() == nil {
			t.Error("Handler with a short secret did not panic")
		}
	}()
	webhookbroker.Handler("short", 0, nil)
}
