package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/txbox/txbox/internal/loopback"
)

const cookieName = "txbox_console"

// MinTokenLength is the shortest token New accepts: a token is the only
// thing between the network and replay and purge.
const MinTokenLength = 16

// sessionValue is what the login cookie holds: an HMAC of a fixed label
// keyed by the token, not the token. A cookie read off a browser's disk or
// a proxy's log then opens this console's pages only, never the API of
// another console sharing the token, and says nothing about the token;
// it stops working when the token changes. It is the same in every
// process with the token, so a console behind a load balancer keeps its
// logins across replicas and restarts.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("txbox console session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// guessGate spaces out the answers to wrong tokens (a login, a bearer
// header, a cookie), all clients together: each wrong answer goes out
// delay after the one before it, so guessing runs at one try per delay
// however many connections ask. A right token is never held. A wrong one
// waits at most maxWait, so a flood cannot park a mistyped login for
// ever.
type guessGate struct {
	delay, maxWait time.Duration

	mu   sync.Mutex
	next time.Time // when the next wrong answer may go out
}

func (g *guessGate) wait(ctx context.Context) {
	if g.delay <= 0 {
		return
	}
	g.mu.Lock()
	now := time.Now()
	at := g.next
	if at.Before(now) {
		at = now
	}
	at = at.Add(g.delay)
	if at.Sub(now) > g.maxWait {
		at = now.Add(g.maxWait)
	} else {
		g.next = at
	}
	g.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// knownKey marks a request whose client proved who it is (the token, or
// a loopback client of a console without one): only such a request sees
// what the console is connected to.
type knownKey struct{}

func known(r *http.Request) bool { v, _ := r.Context().Value(knownKey{}).(bool); return v }

// admit returns 0 when r may proceed, or the status and reason to refuse it.
//
//   - Without a token only loopback clients are served, and only under a
//     loopback Host name: a page on another site that rebinds its own DNS
//     name to 127.0.0.1 still sends its own name as Host (DNS rebinding).
//   - With a token every request carries it (header or login cookie),
//     compared in constant time.
//   - A POST must come from the console's own pages (Origin, Sec-Fetch-Site)
//     and prove it (CSRF token, bearer token or a JSON content type, which
//     a cross-site form cannot send); --read-only refuses it.
//
// ok reports whether the client proved who it is (see knownKey), also
// when the request is refused for another reason.
func (c *Console) admit(r *http.Request) (status int, msg string, ok bool) {
	status, msg, ok, bearer := c.admitWho(r)
	if status != 0 {
		return status, msg, ok
	}
	status, msg = c.admitAction(r, bearer)
	return status, msg, ok
}

// admitWho checks the client: ok when it proved who it is, bearer when it
// did so with the token in an Authorization header.
func (c *Console) admitWho(r *http.Request) (status int, msg string, ok, bearer bool) {
	if c.o.Token == "" {
		if !loopbackAddr(r.RemoteAddr) {
			return http.StatusForbidden, "this console serves loopback clients only; start it with --token to serve others", false, false
		}
		if !loopback.Host(hostOnly(r.Host)) {
			return http.StatusForbidden, "Host " + quoteHost(r.Host) + " is not a loopback name; start the console with --token to serve other names", false, false
		}
		return 0, "", true, false
	}
	bearer, hasBearer := c.bearer(r)
	cookie, hasCookie := c.cookie(r)
	if bearer || cookie {
		return 0, "", true, bearer
	}
	if hasBearer || hasCookie {
		// A wrong token is a guess until shown otherwise.
		c.guesses.wait(r.Context())
	}
	// The login page and its stylesheet are served without the token.
	open := r.URL.Path == "/login" || (r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/static/"))
	if !open {
		return http.StatusUnauthorized, "token required (Authorization: Bearer, or log in)", false, false
	}
	return 0, "", false, false
}

// admitAction checks what the request does: a POST must come from the
// console's own pages and prove it.
func (c *Console) admitAction(r *http.Request, bearer bool) (int, string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return 0, ""
	}
	if !sameOrigin(r) {
		return http.StatusForbidden, "cross-origin request refused"
	}
	if r.URL.Path == "/login" {
		return 0, ""
	}
	if c.o.ReadOnly {
		return http.StatusForbidden, "the console is read-only"
	}
	if bearer || c.csrfOK(r) {
		return 0, ""
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" && isAPI(r) {
		return 0, ""
	}
	return http.StatusForbidden, "missing or wrong CSRF token"
}

// bearer reports whether r carries the token as a bearer, and whether it
// carries an Authorization header at all.
func (c *Console) bearer(r *http.Request) (right, given bool) {
	h := r.Header.Get("Authorization")
	v, ok := strings.CutPrefix(h, "Bearer ")
	return ok && equal(v, c.o.Token), h != ""
}

// cookie reports whether r carries the login cookie of this token, and
// whether it carries one at all.
func (c *Console) cookie(r *http.Request) (right, given bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return false, false
	}
	return equal(ck.Value, c.session), true
}

func (c *Console) csrfOK(r *http.Request) bool {
	v := r.Header.Get("X-CSRF-Token")
	if v == "" {
		v = r.PostFormValue("csrf")
	}
	return v != "" && equal(v, c.csrf)
}

// equal compares in constant time, so the time an answer takes says
// nothing about how much of a guess was right.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// sameOrigin refuses what a browser marks as coming from another site.
// Clients that send neither header (curl) pass: they are not a browser
// acting for someone else.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func loopbackAddr(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100]
	}
	return "\"" + controlPictures(h) + "\""
}
