// Package console is txbox's admin console: an http.Handler that serves
// server-rendered pages and a JSON API over a store: the backlog at a
// glance, dead letters (list, details, replay, purge), parked inbox events
// and where an event is. `txbox ui` serves it; a service can mount it on its
// own mux instead.
//
// It imports no adapter: it works on whatever store.Store it is given.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Options configure a Console. The zero value serves loopback clients only,
// with replay and purge enabled.
type Options struct {
	// Token, when set, is required from every client (Authorization: Bearer,
	// or the cookie the login page sets) and lifts the loopback-only rule.
	// At least MinTokenLength characters. Serve a console with a token over
	// TLS: the token and the login cookie cross the network with every
	// request.
	Token string
	// WrongTokenDelay spaces out the answers to wrong tokens, of all
	// clients together (default 1s; negative: none, for tests).
	WrongTokenDelay time.Duration
	// ReadOnly hides replay and purge; the API answers them 403.
	ReadOnly bool
	// BasePath is where the handler is mounted ("/admin/txbox"), without a
	// trailing slash; links and cookies use it. Strip it before the
	// handler (http.StripPrefix).
	BasePath string
	// Database is shown in the header to clients that gave the token (or
	// loopback clients of a console without one); pass it redacted.
	Database string
	// SampleEvery is how often Run samples the counts for the overview's
	// chart (default 10s); the chart keeps the last hour.
	SampleEvery time.Duration
	// PageSize is the default rows per page (default 50, at most 1000).
	PageSize int
	Logger   *slog.Logger
}

// Console serves the pages and the API. Create it with New.
type Console struct {
	s     store.Store
	inbox store.InboxAdmin // nil when the store has no inbox support
	o     Options
	mux   *http.ServeMux
	pages map[string]*template.Template
	csrf  string // per-process secret the forms carry
	log   *slog.Logger

	session string // the login cookie's value: sessionValue(Token)
	guesses guessGate

	mu      sync.Mutex
	samples []sample
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a console over s.
func New(s store.Store, o Options) (*Console, error) {
	if s == nil {
		return nil, &txbox.ConfigError{Field: "store", Reason: "nil"}
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 10 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.PageSize > maxLimit {
		return nil, &txbox.ConfigError{Field: "PageSize", Reason: fmt.Sprintf("%d is above %d", o.PageSize, maxLimit)}
	}
	o.BasePath = strings.TrimRight(o.BasePath, "/")
	if o.BasePath != "" && !strings.HasPrefix(o.BasePath, "/") {
		return nil, &txbox.ConfigError{Field: "BasePath", Reason: fmt.Sprintf("%q must start with /", o.BasePath)}
	}
	if o.Token != "" && len(o.Token) < MinTokenLength {
		return nil, &txbox.ConfigError{Field: "Token", Reason: fmt.Sprintf("%d characters: want at least %d (e.g. openssl rand -hex 16)", len(o.Token), MinTokenLength)}
	}
	if o.WrongTokenDelay == 0 {
		o.WrongTokenDelay = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Console{s: s, o: o, log: o.Logger, guesses: guessGate{delay: o.WrongTokenDelay, maxWait: 10 * time.Second}}
	if o.Token != "" {
		c.session = sessionValue(o.Token)
	}
	c.inbox, _ = s.(store.InboxAdmin)
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	c.csrf = fmt.Sprintf("%x", b)
	var err error
	if c.pages, err = parsePages(c); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))

	m.HandleFunc("GET /{$}", c.pageOverview)
	m.HandleFunc("GET /dead", c.pageDead)
	m.HandleFunc("GET /dead/event", c.pageDeadEvent)
	m.HandleFunc("GET /dead/confirm", c.pageDeadConfirm)
	m.HandleFunc("POST /dead/replay", c.postDead(actionReplay))
	m.HandleFunc("POST /dead/purge", c.postDead(actionPurge))
	m.HandleFunc("GET /inbox", c.pageInbox)
	m.HandleFunc("GET /inbox/event", c.pageInboxEvent)
	m.HandleFunc("GET /inbox/confirm", c.pageInboxConfirm)
	m.HandleFunc("POST /inbox/replay", c.postInboxReplay)
	m.HandleFunc("GET /find", c.pageFind)
	m.HandleFunc("GET /login", c.pageLogin)
	m.HandleFunc("POST /login", c.postLogin)

	m.HandleFunc("GET /api/overview", c.apiOverview)
	m.HandleFunc("GET /api/dead", c.apiDead)
	m.HandleFunc("GET /api/dead/count", c.apiDeadCount)
	m.HandleFunc("GET /api/dead/event", c.apiDeadEvent)
	m.HandleFunc("POST /api/dead/replay", c.apiDeadAction(actionReplay))
	m.HandleFunc("POST /api/dead/purge", c.apiDeadAction(actionPurge))
	m.HandleFunc("GET /api/inbox", c.apiInbox)
	m.HandleFunc("GET /api/inbox/event", c.apiInboxEvent)
	m.HandleFunc("POST /api/inbox/replay", c.apiInboxReplay)
	m.HandleFunc("GET /api/find", c.apiFind)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API route: "+r.Method+" "+r.URL.Path)
	})
	c.mux = m
}

// ServeHTTP checks who is asking (loopback, Host, token, CSRF, read-only)
// before any route runs.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the console's own form posts, which the origin
	// check must refuse. Other sites still get no referrer.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	status, msg, ok := c.admit(r)
	if ok {
		r = r.WithContext(context.WithValue(r.Context(), knownKey{}, true))
	}
	if status != 0 {
		if status == http.StatusUnauthorized && r.Method == http.MethodGet && !isAPI(r) && r.URL.Path != "/login" {
			http.Redirect(w, r, c.o.BasePath+"/login", http.StatusSeeOther)
			return
		}
		c.fail(w, r, status, msg)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// csp allows nothing but the console's own stylesheet and images: no
// script runs at all, so an escaping mistake cannot become code.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Run samples the counts for the overview's chart every SampleEvery until
// ctx ends. Without Run the chart still gets a point whenever the overview
// is opened.
func (c *Console) Run(ctx context.Context) error {
	t := time.NewTicker(c.o.SampleEvery)
	defer t.Stop()
	for {
		if _, err := c.takeSample(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("console: sample", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }
