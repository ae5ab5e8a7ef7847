// Package webhookbroker delivers txbox events as HTTP POST requests
// (webhooks) and receives them in Go services, in CloudEvents 1.0 binary
// content mode (HTTP binding), signed as the Standard Webhooks specification
// describes.
//
// Its directory is broker/webhook; like every broker adapter, the package is
// named <folder>broker:
//
//	import webhookbroker "github.com/txbox/txbox/broker/webhook"
//
// # Wire format
//
// One event is one POST to the URL made from the relay's --broker base URL
// and the event's rendered topic (see Publisher.Target). Every CloudEvents
// attribute travels as a header "ce-" + attribute ("ce-specversion",
// "ce-id", "ce-type", "ce-source", "ce-subject", "ce-time",
// "ce-aggregatetype", "ce-aggregateversion" (when above 0), "ce-traceparent", ...), its
// value percent-encoded as the binding requires (space, '"', '%' and
// anything outside printable ASCII); datacontenttype is the Content-Type,
// "application/json"; the body is the payload, byte for byte.
//
// Each request is signed: "webhook-id" is the event id, "webhook-timestamp"
// the Unix time of sending, and "webhook-signature" is
// "v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>", the
// Standard Webhooks scheme, so receivers in other languages can verify it
// with its libraries (give them the secret in "whsec_<base64>" form; see
// Key). A receiver refuses timestamps more than a tolerance (default 5
// minutes) away from its clock, which bounds replays, and drops repeated
// event ids through its inbox.
//
// # Results
//
// A 2xx answer delivers the event. An answer about the endpoint rather
// than the event is an outage of the way out (txbox.ErrBrokerUnavailable:
// the relay spends none of the event's attempts and waits): 5xx (the
// endpoint is down, overloaded or failing), 408 and 429 (timeout, rate
// limit), 401, 403 and 407 (credentials or signature refused), 404, 405 and
// 421 (no endpoint for that path: the destination missing), 425, and 3xx
// (redirects are not followed, since a POST must not become a GET: the
// endpoint's URL must be configured). So are network failures and
// timeouts. Any other 4xx (400, 409, 410, 413, 415, 422, ...) is the
// receiver's verdict on the event itself and fails it permanently (DEAD).
// Each error carries the status and the start of the answer's body, which
// the relay records in last_error.
//
// # Receiving
//
// A Receiver is an http.Handler and a broker.Subscriber for the inbox: a
// request is a Delivery and stays open until the inbox settles it; Ack
// answers 200, Nak answers 503 with Retry-After, and the sender's retry is
// the redelivery. Handler is the simpler form for a function that needs no
// inbox.
package webhookbroker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/internal/redact"
)

// Defaults for Options.
const (
	DefaultAckTimeout  = 10 * time.Second
	DefaultMaxInFlight = 64
	// HeaderPrefix starts every CloudEvents attribute header.
	HeaderPrefix = "ce-"
	// TopicPlaceholder in the base URL is replaced by the topic; without
	// it the topic is appended to the path.
	TopicPlaceholder = "{topic}"
)

// Options configure a Publisher.
type Options struct {
	// Secret signs every request (see Key). Required.
	Secret string
	// AckTimeout bounds one request, answer (the receiver's verdict)
	// included, even when the caller's context has no deadline. Default
	// 10s.
	AckTimeout time.Duration
	// MaxInFlight bounds the requests open at once, over all concurrent
	// Publish calls. Default 64.
	MaxInFlight int
	// MaxPayload, when > 0, fails larger payloads permanently before they
	// are sent; set it to the receivers' limit.
	MaxPayload int
	// Name is the client name the receivers see, as the requests'
	// User-Agent. Default "txbox-webhook/1".
	Name string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// ClientOptions, when set, edits the Publisher's own HTTP client, whose
	// transport keeps MaxInFlight connections per host alive: another
	// Transport (a proxy, TLS settings, tracing), a cookie jar, or the
	// whole client (*c = *yours). Its redirects are turned off again
	// afterwards: a POST must not become a GET.
	ClientOptions func(*http.Client)
}

// withDefaults fills the fields left zero.
func (o *Options) withDefaults() {
	o.AckTimeout = defaults.Positive(o.AckTimeout, DefaultAckTimeout)
	o.MaxInFlight = defaults.Positive(o.MaxInFlight, DefaultMaxInFlight)
	o.Name = cmp.Or(o.Name, "txbox-webhook/1")
	o.Logger = cmp.Or(o.Logger, slog.Default())
}

// Publisher POSTs events to webhook endpoints. It is safe for concurrent
// use.
type Publisher struct {
	base     *url.URL
	prefix   string // escaped path before the topic
	suffix   string // escaped path after it
	redacted string
	key      []byte
	opts     Options
	client   *http.Client
	own      *http.Transport
	slots    chan struct{}
	log      *slog.Logger
	closed   sync.Once
}

var _ broker.Publisher = (*Publisher)(nil)

// Open checks the base URL and the secret; it sends nothing, since an
// endpoint that is down is a per-event, retryable failure. baseURL is
// http(s)://host[:port][/path] and may hold user:password for basic
// authentication (never logged or returned in clear) and TopicPlaceholder
// once, in its path. Errors are *txbox.ConfigError.
func Open(_ context.Context, baseURL string, opts Options) (*Publisher, error) {
	bad := func(field, format string, a ...any) (*Publisher, error) {
		return nil, &txbox.ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	const urlField = "webhook URL"
	redacted := redact.URL(baseURL)
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return bad(urlField, "%s does not parse", redacted)
	case u.Scheme != "http" && u.Scheme != "https":
		return bad(urlField, "%s: scheme %q, want http or https", redacted, u.Scheme)
	case u.Host == "":
		return bad(urlField, "%s has no host", redacted)
	case u.Fragment != "" || strings.Contains(baseURL, "#"):
		return bad(urlField, "%s has a fragment", redacted)
	case strings.Contains(u.RawQuery, TopicPlaceholder) || strings.Contains(u.Host, "{"):
		return bad(urlField, "%s: %s may only stand in the path", redacted, TopicPlaceholder)
	}
	key, err := Key(opts.Secret)
	if err != nil {
		return bad("webhook secret", "%v", err)
	}
	p := &Publisher{base: u, redacted: redacted, key: key, opts: opts}
	path := u.EscapedPath()
	const escaped = "%7Btopic%7D"
	switch n := strings.Count(path, escaped); {
	case n > 1:
		return bad(urlField, "%s holds %s more than once", redacted, TopicPlaceholder)
	case n == 1:
		p.prefix, p.suffix, _ = strings.Cut(path, escaped)
	default:
		p.prefix = strings.TrimRight(path, "/") + "/"
	}
	p.opts.withDefaults()
	p.log = p.opts.Logger
	p.slots = make(chan struct{}, p.opts.MaxInFlight)
	p.own = http.DefaultTransport.(*http.Transport).Clone()
	p.own.MaxIdleConnsPerHost = p.opts.MaxInFlight
	p.client = &http.Client{Transport: p.own}
	if p.opts.ClientOptions != nil {
		p.opts.ClientOptions(p.client)
	}
	p.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return p, nil
}

// target is the URL an event on topic is posted to. The topic's
// '/'-separated segments are percent-encoded each and go where the base
// URL's TopicPlaceholder is, or else after its path: with base
// https://hooks.example.com/in and topic "billing/InvoiceIssued", the event
// goes to https://hooks.example.com/in/billing/InvoiceIssued. The host is
// always the base URL's, so a row cannot steer a request elsewhere. An
// empty topic or segment and the segments "." and ".." are refused.
func (p *Publisher) target(topic string) (string, error) {
	if topic == "" {
		return "", errors.New("empty topic")
	}
	segs := strings.Split(topic, "/")
	for i, s := range segs {
		switch s {
		case "":
			return "", fmt.Errorf("topic %q has an empty path segment", topic)
		case ".", "..":
			return "", fmt.Errorf("topic %q has the path segment %q", topic, s)
		}
		segs[i] = url.PathEscape(s)
	}
	u := *p.base
	u.User = nil
	u.RawPath = p.prefix + strings.Join(segs, "/") + p.suffix
	path, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return "", fmt.Errorf("topic %q: %w", topic, err)
	}
	u.Path = path
	return u.String(), nil
}

// MaxPayload is Options.MaxPayload (0: no limit).
func (p *Publisher) MaxPayload() int { return max(p.opts.MaxPayload, 0) }

// Publish POSTs the messages, at most MaxInFlight at once over all calls.
// Messages of one aggregate go in slice order, each after the one before it
// was answered; if one fails retryably, the later ones of its aggregate in
// the call are not sent and fail with the same cause, so that none
// overtakes it. A permanent failure does not hold its aggregate back, as in
// the relay.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = txbox.Unavailable(fmt.Errorf("webhook: publish%s: %w", timedOut(err), err))
		}
		return errs
	}
	lanes := map[string][]int{}
	var order []string
	for i, m := range msgs {
		k := m.Event.AggregateType + "\x00" + m.Event.AggregateID
		if _, ok := lanes[k]; !ok {
			order = append(order, k)
		}
		lanes[k] = append(lanes[k], i)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			var held error
			for _, i := range idx {
				if held != nil {
					errs[i] = fmt.Errorf("webhook: event %s not sent: an earlier event of aggregate %s in this call failed: %w", msgs[i].Event.ID, msgs[i].Event.AggregateID, held)
					continue
				}
				errs[i] = p.post(ctx, msgs[i])
				if errs[i] != nil && !errors.Is(errs[i], txbox.ErrPermanent) {
					held = errs[i]
				}
			}
		}(lanes[k])
	}
	wg.Wait()
	return errs
}

// post sends one message and classifies the answer.
func (p *Publisher) post(ctx context.Context, m broker.Message) error {
	target, err := p.target(m.Topic)
	if err != nil {
		return txbox.Permanent(fmt.Errorf("webhook: event %s: %w", m.Event.ID, err))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return err
	}
	if limit := p.opts.MaxPayload; limit > 0 && len(m.Event.Payload) > limit {
		return txbox.Permanent(fmt.Errorf("webhook: event %s: payload of %d bytes is over the limit of %d", m.Event.ID, len(m.Event.Payload), limit))
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return txbox.Unavailable(fmt.Errorf("webhook: waiting to POST event %s%s: %w", m.Event.ID, timedOut(ctx.Err()), ctx.Err()))
	}
	defer func() { <-p.slots }()

	rctx, cancel := context.WithTimeout(ctx, p.opts.AckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(m.Event.Payload))
	if err != nil {
		return txbox.Permanent(fmt.Errorf("webhook: event %s: %w", m.Event.ID, err))
	}
	if u := p.base.User; u != nil {
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
	}
	h := req.Header
	for _, a := range attrs {
		if a[0] == broker.AttrDataContentType {
			continue // the binding maps it to Content-Type
		}
		h[HeaderPrefix+a[0]] = []string{encodeValue(a[1])}
	}
	h.Set("Content-Type", broker.ContentJSON)
	h.Set("User-Agent", p.opts.Name)
	now := time.Now()
	h[HeaderID] = []string{m.Event.ID}
	h[HeaderTimestamp] = []string{strconv.FormatInt(now.Unix(), 10)}
	h[HeaderSignature] = []string{Sign(p.key, m.Event.ID, now, m.Event.Payload)}

	resp, err := p.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its text repeats the URL; ours says it once
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return txbox.Unavailable(fmt.Errorf("webhook: POST %s (event %s)%s: %w", redact.URL(target), m.Event.ID, timedOut(err), err))
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection can be reused
	_ = resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	text := fmt.Sprintf("webhook: POST %s (event %s): %s", redact.URL(target), m.Event.ID, resp.Status)
	if ra := resp.Header.Get("Retry-After"); ra != "" && (code == 429 || code == 503) {
		text += ", Retry-After " + ra
	}
	if loc := resp.Header.Get("Location"); loc != "" && code >= 300 && code < 400 {
		text += ", Location " + redact.URL(loc) + " (redirects are not followed; configure the final URL)"
	}
	if s := printable(snippet); s != "" {
		text += ": " + s
	}
	if endpointStatus(code) {
		return txbox.Unavailable(errors.New(text))
	}
	return txbox.Permanent(errors.New(text))
}

// endpointStatus reports whether an answer that is not 2xx is about the
// endpoint (unreachable behind a proxy, failing, overloaded, missing at
// this path, refusing the credentials or the signature, moved) rather than
// about the event, which every other 4xx is.
func endpointStatus(code int) bool {
	switch {
	case code < 200, code >= 300 && code < 400, code >= 500:
		return true
	}
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusMisdirectedRequest,
		http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return false
}

// printable makes an answer's body fit for one line of last_error.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(b) == 512 {
		s += " ..."
	}
	return s
}

// Close releases idle connections.
func (p *Publisher) Close() error {
	p.closed.Do(func() {
		if p.own != nil {
			p.own.CloseIdleConnections()
		}
	})
	return nil
}

// timedOut notes a timeout in the message, where the cause alone ("context
// deadline exceeded", "i/o timeout") reads less plainly to an operator.
func timedOut(err error) string {
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return ", timed out"
	}
	return ""
}

// encodeValue percent-encodes an attribute value as the CloudEvents HTTP
// binding requires: space, '"', '%' and every byte outside printable ASCII.
func encodeValue(v string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c > 0x20 && c < 0x7f && c != '"' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
