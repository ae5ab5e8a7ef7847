package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
)

type harness interface {
	Open(t *testing.T) store.Store
	Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error)
}

var dialects = []struct {
	name string
	h    harness
}{
	{"postgres", storeenv.Postgres{}},
	{"mysql", storeenv.MySQL{}},
	{"sqlite", storeenv.SQLite{}},
}

// eachStore runs fn on a migrated store of every dialect.
func eachStore(t *testing.T, fn func(t *testing.T, h harness, s store.Store)) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			s := d.h.Open(t)
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			fn(t, d.h, s)
		})
	}
}

func write(t *testing.T, h harness, s store.Store, events ...txbox.Event) {
	t.Helper()
	tx, commit, rollback := h.Begin(t, s)
	if err := outbox.NewWriter(s.Dialect()).Add(context.Background(), tx, events...); err != nil {
		_ = rollback()
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
}

// kill claims every deliverable row and sends it to DEAD with errs[i].
func kill(t *testing.T, s store.Store, errs ...string) []store.Record {
	t.Helper()
	ctx := context.Background()
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "test-relay#1", Limit: len(errs), LeaseFor: time.Minute})
	if err != nil || len(recs) != len(errs) {
		t.Fatalf("claim: %v, %d rows, want %d", err, len(recs), len(errs))
	}
	var fs []store.Failure
	for i, r := range recs {
		fs = append(fs, store.Failure{ID: r.ID, Error: errs[i], Dead: true})
	}
	if n, err := s.MarkFailed(ctx, "test-relay#1", fs); err != nil || n != int64(len(fs)) {
		t.Fatalf("mark dead: %d %v", n, err)
	}
	return recs
}

// park records e as parked (DEAD) for consumer, as the inbox does after
// its last failed attempt.
func park(t *testing.T, h harness, s store.Store, consumer string, e txbox.Event, msg string) {
	t.Helper()
	tx, commit, rollback := h.Begin(t, s)
	_, parked, err := s.(interface{ InboxDialect() store.InboxDialect }).InboxDialect().InboxFail(context.Background(), tx, consumer, e, msg, 1, txbox.StatusRetry)
	if err != nil || !parked {
		_ = rollback()
		t.Fatalf("park: %v %v", parked, err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newConsole(t *testing.T, s store.Store, o console.Options) *console.Console {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	c, err := console.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// req is a request from a loopback client to a loopback Host unless the
// options say otherwise.
type req struct {
	method, path string
	form         url.Values
	header       map[string]string
	remote, host string
}

func do(t *testing.T, h http.Handler, r req) *httptest.ResponseRecorder {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	q := httptest.NewRequest(r.method, "http://127.0.0.1:8080"+r.path, body)
	q.RemoteAddr = "127.0.0.1:50000"
	if r.remote != "" {
		q.RemoteAddr = r.remote
	}
	if r.host != "" {
		q.Host = r.host
	}
	if r.form != nil {
		q.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range r.header {
		q.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, q)
	return w
}

func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	w := do(t, h, req{path: path})
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, w.Code, w.Body.String())
	}
	return w.Body.String()
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrfOf reads the CSRF token from a page with a form.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

func ev(agg string, n int) txbox.Event {
	return txbox.MustEvent("Order", agg, "OrderPlaced", map[string]any{"agg": agg, "n": n})
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

func must(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
