package webhookbroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/ce"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/receive"
)

// Defaults for ReceiverOptions.
const (
	// defaultMaxPayload is the Receiver's; a Publisher has no limit of its
	// own unless Options.MaxPayload sets one.
	defaultMaxPayload  = 1 << 20
	defaultHoldTimeout = 60 * time.Second
	defaultMaxPending  = 1024
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	// Secrets that may sign requests; during a rotation, the old and the
	// new one. At least one (see Key).
	Secrets []string
	// Tolerance is how far a request's timestamp may lie from the
	// receiver's clock. Default 5 minutes.
	Tolerance time.Duration
	// MaxPayload refuses requests with a larger body (the payload, in
	// binary mode) with 413, which the sender takes as permanent. Default
	// 1 MiB.
	MaxPayload int
	// PathPrefix is cut from the request path to give the topic (Raw's
	// Topic); a path without it is answered 404. Default "/".
	PathPrefix string
	// HoldTimeout bounds how long a request waits for the inbox to settle
	// it; then it is answered 503 and the sender retries. Default 60s. The
	// sender's own timeout usually ends the wait first.
	HoldTimeout time.Duration
	// MaxPending bounds the requests waiting to be received; more are
	// answered 503 at once. Default 1024.
	MaxPending int
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Receiver turns webhook requests into inbox deliveries. It is an
// http.Handler (mount it where the sender posts) and a broker.Subscriber
// (give it to inbox.Config.Subscriber).
//
// A request whose signature or timestamp does not verify is answered 401
// and never delivered. Any other is held open as a Delivery until the inbox
// settles it: Ack answers 200 (the event is committed, or was a duplicate,
// or was parked), Nak answers 503 with Retry-After set to the delay, and the
// sender's retry is the redelivery. The sender takes a 503 as an outage and
// spends none of the event's attempts on it: the inbox counts the attempts
// here, and parks the event after its maximum. A request that does not
// decode as a txbox CloudEvent is still delivered: its Event() fails
// permanently, the inbox parks it raw and acknowledges it, and the sender
// gets 200 (the message is kept, not lost, and not retried forever).
//
// Nothing is stored before the inbox commits: until then the sender holds
// the event and retries. If the receiving process dies, the open requests
// fail and are retried; if the sender gives up waiting (its timeout), the
// delivery is void, its Ack fails, and the retry brings it again, which the
// inbox absorbs as a duplicate if it had committed.
type Receiver struct {
	v      *verifier
	opts   ReceiverOptions
	log    *slog.Logger
	mu     sync.Mutex
	queue  []*delivery
	ready  chan struct{}
	closed bool
	done   chan struct{}
}

var (
	_ broker.Subscriber = (*Receiver)(nil)
	_ http.Handler      = (*Receiver)(nil)
)

// withDefaults fills the fields left zero.
func (o *ReceiverOptions) withDefaults() {
	o.MaxPayload = defaults.Positive(o.MaxPayload, defaultMaxPayload)
	o.PathPrefix = cmp.Or(o.PathPrefix, "/")
	o.HoldTimeout = defaults.Positive(o.HoldTimeout, defaultHoldTimeout)
	o.MaxPending = defaults.Positive(o.MaxPending, defaultMaxPending)
	o.Logger = cmp.Or(o.Logger, slog.Default())
}

// NewReceiver checks the options. Errors are *txbox.ConfigError.
func NewReceiver(opts ReceiverOptions) (*Receiver, error) {
	v, err := newVerifier(opts.Secrets, opts.Tolerance)
	if err != nil {
		return nil, &txbox.ConfigError{Field: "webhook secret", Reason: err.Error()}
	}
	opts.withDefaults()
	return &Receiver{v: v, opts: opts, log: opts.Logger, ready: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// request is a verified webhook request.
type request struct {
	topic  string
	header http.Header
	body   []byte
}

// read checks and reads r, or answers it and returns nil.
func read(w http.ResponseWriter, r *http.Request, v *verifier, prefix string, maxBody int, log *slog.Logger) *request {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return nil
	}
	topic, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		http.NotFound(w, r)
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(maxBody)))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body over %d bytes", maxBody), http.StatusRequestEntityTooLarge)
			return nil
		}
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return nil
	}
	if err := v.verify(r.Header.Get(HeaderID), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body); err != nil {
		log.Warn("webhook: refused a request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "signature: "+err.Error(), http.StatusUnauthorized)
		return nil
	}
	return &request{topic: topic, header: r.Header, body: body}
}

// ServeHTTP verifies the request, queues it as a delivery and answers it
// once the delivery is settled.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := read(w, r, rc.v, rc.opts.PathPrefix, rc.opts.MaxPayload, rc.log)
	if req == nil {
		return
	}
	d := &delivery{req: req, verdict: make(chan verdict, 1)}
	rc.mu.Lock()
	switch {
	case rc.closed:
		rc.mu.Unlock()
		busy(w, "receiver is shutting down", time.Second)
		return
	case len(rc.queue) >= rc.opts.MaxPending:
		rc.mu.Unlock()
		busy(w, "too many deliveries waiting", time.Second)
		return
	}
	rc.queue = append(rc.queue, d)
	rc.mu.Unlock()
	receive.Wake(rc.ready)

	timer := time.NewTimer(rc.opts.HoldTimeout)
	defer timer.Stop()
	select {
	case v := <-d.verdict:
		if v.ack {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		busy(w, "not processed yet; retry", v.delay)
		return
	case <-r.Context().Done():
		d.settle(verdict{void: "the sender closed the request"})
	case <-timer.C:
		if d.settle(verdict{void: "not settled within the receiver's hold timeout"}) {
			busy(w, "not processed in time; retry", time.Second)
			return
		}
	case <-rc.done:
		if d.settle(verdict{void: "the receiver closed"}) {
			busy(w, "receiver is shutting down", time.Second)
			return
		}
	}
	// Settled meanwhile: answer as settled.
	select {
	case v := <-d.verdict:
		if v.ack {
			w.WriteHeader(http.StatusOK)
			return
		}
		busy(w, "not processed yet; retry", v.delay)
	default:
	}
}

// busy answers 503 with Retry-After in whole seconds (rounded up).
func busy(w http.ResponseWriter, msg string, after time.Duration) {
	secs := int64(math.Ceil(max(after, 0).Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// Receive returns up to max waiting deliveries, or waits for the first.
func (rc *Receiver) Receive(ctx context.Context, max int) ([]broker.Delivery, error) {
	max = receive.Max(max)
	for {
		rc.mu.Lock()
		if rc.closed {
			rc.mu.Unlock()
			return nil, errors.New("webhook: receiver is closed")
		}
		rc.queue = slices.DeleteFunc(rc.queue, func(d *delivery) bool { return d.isVoid() })
		if len(rc.queue) > 0 {
			n := min(max, len(rc.queue))
			out := make([]broker.Delivery, n)
			for i, d := range rc.queue[:n] {
				out[i] = d
			}
			rc.queue = slices.Delete(rc.queue, 0, n)
			if len(rc.queue) > 0 {
				receive.Wake(rc.ready)
			}
			rc.mu.Unlock()
			return out, nil
		}
		rc.mu.Unlock()
		select {
		case <-rc.ready:
		case <-rc.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close answers every open request 503, so their senders retry, and ends
// Receive.
func (rc *Receiver) Close() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.closed {
		rc.closed = true
		close(rc.done)
	}
	return nil
}

type verdict struct {
	ack   bool
	delay time.Duration
	void  string // the request ended unanswered; why
}

// delivery is one open request.
type delivery struct {
	req     *request
	mu      sync.Mutex
	settled *verdict
	verdict chan verdict
}

// settle records v if nothing was settled before, and reports whether it
// did.
func (d *delivery) settle(v verdict) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled != nil {
		return false
	}
	d.settled = &v
	if v.void == "" {
		d.verdict <- v
	}
	return true
}

func (d *delivery) isVoid() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled != nil && d.settled.void != ""
}

func (d *delivery) settleErr(what string, v verdict) error {
	if d.settle(v) {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.settled; s.void != "" {
		return txbox.Unavailable(fmt.Errorf("webhook: %s: %s; the sender retries", what, s.void))
	}
	if s := d.settled; s.ack && v.ack {
		return nil
	}
	return fmt.Errorf("webhook: %s: delivery already settled", what)
}

// Ack answers the request 200.
func (d *delivery) Ack(context.Context) error { return d.settleErr("ack", verdict{ack: true}) }

// Nak answers the request 503 with Retry-After = delay (whole seconds,
// rounded up); the sender retries, with its own backoff.
func (d *delivery) Nak(_ context.Context, delay time.Duration) error {
	return d.settleErr("nak", verdict{delay: delay})
}

// Attempt is 0: a webhook request does not say how often it was sent.
func (d *delivery) Attempt() int { return 0 }

// Event decodes the ce- headers (any case; values percent-decoded) and the
// body; Content-Type stands in for a missing ce-datacontenttype.
func (d *delivery) Event() (txbox.Event, error) {
	return decode(d.req.header, d.req.body)
}

func decode(h http.Header, body []byte) (txbox.Event, error) {
	bad := func(format string, a ...any) (txbox.Event, error) {
		return txbox.Event{}, ce.Malformed(format, a...)
	}
	ct := h.Get("Content-Type")
	if strings.HasPrefix(ct, "application/cloudevents") {
		return bad("structured content mode (%s) is not supported; send binary mode", ct)
	}
	attrs := ce.Attrs{}
	for k, vs := range h {
		n, ok := strings.CutPrefix(strings.ToLower(k), HeaderPrefix)
		if !ok || n == "" || len(vs) == 0 {
			continue
		}
		if len(vs) > 1 {
			return bad("attribute %s given %d times", n, len(vs))
		}
		v, err := url.PathUnescape(vs[0])
		if err != nil || !utf8.ValidString(v) {
			return bad("attribute %s: %q is not a percent-encoded UTF-8 value", n, vs[0])
		}
		attrs[n] = v // one value each, checked above
	}
	return attrs.Event(ct, body)
}

// Raw keeps the topic, the headers (names in lower case, repeated values
// joined with ", "; credentials left out) and the body. ID is webhook-id,
// or ce-id.
func (d *delivery) Raw() broker.RawMessage {
	h := map[string]string{}
	for k, vs := range d.req.header {
		switch lk := strings.ToLower(k); lk {
		case "authorization", "proxy-authorization", "cookie":
		default:
			h[lk] = strings.Join(vs, ", ")
		}
	}
	id := h[HeaderID]
	if id == "" {
		id = h[HeaderPrefix+broker.AttrID]
	}
	return broker.RawMessage{Topic: d.req.topic, ID: id, Headers: h, Body: append([]byte(nil), d.req.body...)}
}

// Handler returns an http.Handler that verifies each request with secret
// (see Key) and tolerance (0: 5 minutes), decodes the event and
// calls fn. Its answers tell the sender what to do: 200 when fn returned
// nil; 401 when the signature or timestamp does not verify; 400 when the
// request is not a txbox CloudEvent and 422 when fn's error wraps
// txbox.ErrPermanent, both with the reason, which the relay records when it
// sends the event to DEAD; 500 for any other error of fn, which the relay
// takes as an outage of the endpoint: it retries the event without
// spending its attempts, for as long as fn fails, so fn returns
// txbox.Permanent for an event it can never take. It has no inbox: fn
// must be idempotent, or use a Receiver with package inbox. Handler panics
// if the secret is unusable, as at start-up.
func Handler(secret string, tolerance time.Duration, fn func(ctx context.Context, e txbox.Event) error) http.Handler {
	v, err := newVerifier([]string{secret}, tolerance)
	if err != nil {
		panic("webhookbroker.Handler: " + err.Error())
	}
	log := slog.Default()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := read(w, r, v, "/", defaultMaxPayload, log)
		if req == nil {
			return
		}
		e, err := decode(req.header, req.body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch err := fn(r.Context(), e); {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case errors.Is(err, txbox.ErrPermanent):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}
