package console

import (
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

const cookieName = "txbox_console"

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
func (c *Console) admit(r *http.Request) (int, string) {
	if c.o.Token == "" {
		if !loopbackAddr(r.RemoteAddr) {
			return http.StatusForbidden, "this console serves loopback clients only; start it with --token to serve others"
		}
		if !LoopbackHost(hostOnly(r.Host)) {
			return http.StatusForbidden, "Host " + quoteHost(r.Host) + " is not a loopback name; start the console with --token to serve other names"
		}
	}
	bearer := c.o.Token != "" && c.bearer(r)
	// The login page and its stylesheet are served without the token.
	open := r.URL.Path == "/login" || (r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/static/"))
	if c.o.Token != "" && !bearer && !c.cookie(r) && !open {
		return http.StatusUnauthorized, "token required (Authorization: Bearer, or log in)"
	}
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

func (c *Console) bearer(r *http.Request) bool {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && equal(v, c.o.Token)
}

func (c *Console) cookie(r *http.Request) bool {
	ck, err := r.Cookie(cookieName)
	return err == nil && equal(ck.Value, c.o.Token)
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

// LoopbackHost reports whether host (a name or an IP, without port) names
// this machine only: localhost, *.localhost, 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
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
