package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
)

// The checks in front of the routes do not depend on the store; SQLite
// keeps them fast.
func openSQLite(t *testing.T) store.Store {
	s := storeenv.OpenSQLite(t, sqlite.Options{})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// Without a token only loopback clients under a loopback Host name are
// served: a rebinding page sends its own name as Host.
func TestLoopbackOnlyWithoutToken(t *testing.T) {
	c := newConsole(t, openSQLite(t), console.Options{})
	for _, r := range []req{
		{remote: "10.0.0.7:4000"},
		{remote: "[2001:db8::1]:4000"},
		{host: "evil.example:8080"},
		{host: "127.0.0.1.evil.example"},
		{host: "localhost.evil.example:8080"},
		{host: "evil.example", path: "/api/overview"},
	} {
		if r.path == "" {
			r.path = "/"
		}
		w := do(t, c, r)
		must(t, w.Code == http.StatusForbidden, "%+v: %d, want 403", r, w.Code)
	}
	for _, r := range []req{
		{host: "localhost:8080"},
		{host: "127.0.0.1:8080"},
		{host: "[::1]:8080", remote: "[::1]:4000"},
		{host: "console.localhost"},
	} {
		r.path = "/"
		w := do(t, c, r)
		must(t, w.Code == http.StatusOK, "%+v: %d, want 200", r, w.Code)
	}
}

// With a token every request needs it, from anywhere; the page offers a
// login that sets a SameSite=Strict, HttpOnly cookie.
func TestToken(t *testing.T) {
	c := newConsole(t, openSQLite(t), console.Options{Token: "s3cret-s3cret-s3cret", WrongTokenDelay: -1})
	remote := "10.0.0.7:4000"
	w := do(t, c, req{path: "/api/overview", remote: remote, host: "txbox.internal"})
	must(t, w.Code == http.StatusUnauthorized && strings.Contains(w.Body.String(), `"error"`), "no token: %d", w.Code)
	w = do(t, c, req{path: "/", remote: remote, host: "txbox.internal"})
	must(t, w.Code == http.StatusSeeOther && w.Header().Get("Location") == "/login", "page without token: %d %v", w.Code, w.Header())
	for _, bad := range []string{"Bearer s3cret-s3cret-s3cre", "Bearer s3cret-s3cret-s3cret2", "s3cret-s3cret-s3cret", "Bearer "} {
		w = do(t, c, req{path: "/api/overview", remote: remote, header: map[string]string{"Authorization": bad}})
		must(t, w.Code == http.StatusUnauthorized, "%q: %d", bad, w.Code)
	}
	w = do(t, c, req{path: "/api/overview", remote: remote, host: "txbox.internal", header: map[string]string{"Authorization": "Bearer s3cret-s3cret-s3cret"}})
	must(t, w.Code == http.StatusOK, "bearer: %d", w.Code)

	get(t, c, "/login")
	w = do(t, c, req{path: "/static/style.css", remote: remote})
	must(t, w.Code == http.StatusOK && strings.Contains(w.Header().Get("Content-Type"), "text/css"), "the login page's stylesheet: %d %v", w.Code, w.Header())
	w = do(t, c, req{method: "POST", path: "/login", form: url.Values{"token": {"nope"}}, remote: remote})
	must(t, w.Code == http.StatusUnauthorized, "wrong login: %d", w.Code)
	w = do(t, c, req{method: "POST", path: "/login", form: url.Values{"token": {"s3cret-s3cret-s3cret"}}, remote: remote, header: map[string]string{"Origin": "http://evil.example"}})
	must(t, w.Code == http.StatusForbidden, "cross-origin login: %d", w.Code)
	w = do(t, c, req{method: "POST", path: "/login", form: url.Values{"token": {"s3cret-s3cret-s3cret"}}, remote: remote})
	ck := w.Result().Cookies()
	must(t, w.Code == http.StatusSeeOther && len(ck) == 1 && ck[0].HttpOnly && ck[0].SameSite == http.SameSiteStrictMode, "login: %d %v", w.Code, ck)
	w = do(t, c, req{path: "/", remote: remote, header: map[string]string{"Cookie": ck[0].Name + "=" + ck[0].Value}})
	must(t, w.Code == http.StatusOK, "cookie: %d", w.Code)
	w = do(t, c, req{path: "/", remote: remote, header: map[string]string{"Cookie": ck[0].Name + "=s3cret-s3cret-s3cret"}})
	must(t, w.Code == http.StatusSeeOther, "wrong cookie: %d", w.Code)
}

// A state-changing request is a POST from the console's own page with its
// CSRF token; a GET cannot change anything.
func TestCSRF(t *testing.T) {
	s := openSQLite(t)
	c := newConsole(t, s, console.Options{})
	e := ev("a", 1)
	write(t, storeenv.SQLite{}, s, e)
	kill(t, s, "boom")
	csrf := csrfOf(t, get(t, c, "/dead/event?"+q("id", e.ID)))
	wrong := csrf[:len(csrf)-1] + "0"
	if wrong == csrf {
		wrong = csrf[:len(csrf)-1] + "1"
	}
	form := func(token string) url.Values {
		return url.Values{"csrf": {token}, "event_id": {"e1"}}
	}
	for name, r := range map[string]req{
		"no token":          {form: url.Values{"event_id": {"e1"}}},
		"wrong token":       {form: form(wrong)},
		"cross-site fetch":  {form: form(csrf), header: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"same-site fetch":   {form: form(csrf), header: map[string]string{"Sec-Fetch-Site": "same-site"}},
		"foreign origin":    {form: form(csrf), header: map[string]string{"Origin": "http://evil.example"}},
		"null origin":       {form: form(csrf), header: map[string]string{"Origin": "null"}},
		"api form, no json": {path: "/api/dead/purge?event_id=e1", form: url.Values{}},
	} {
		r.method = "POST"
		if r.path == "" {
			r.path = "/dead/purge"
		}
		w := do(t, c, r)
		must(t, w.Code == http.StatusForbidden, "%s: %d, want 403 (%s)", name, w.Code, w.Body.String())
	}
	w := do(t, c, req{method: "POST", path: "/dead/replay", form: form(csrf), header: map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}})
	must(t, w.Code == http.StatusSeeOther, "same origin with token: %d %s", w.Code, w.Body.String())
	w = do(t, c, req{method: "POST", path: "/api/dead/purge?event_id=e1", header: map[string]string{"X-CSRF-Token": csrf}})
	must(t, w.Code == http.StatusOK, "api with header token: %d %s", w.Code, w.Body.String())
	w = do(t, c, req{method: "GET", path: "/dead/purge?event_id=e1"})
	must(t, w.Code == http.StatusMethodNotAllowed, "GET of an action: %d", w.Code)
	w = do(t, c, req{path: "/"})
	must(t, strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") && w.Header().Get("X-Frame-Options") == "DENY", "headers: %v", w.Header())
}

// --read-only: no replay or purge on any page, and the API refuses them.
func TestReadOnly(t *testing.T) {
	func(t *testing.T, h harness, s store.Store) {
		c := newConsole(t, s, console.Options{ReadOnly: true})
		e := ev("a", 1)
		write(t, h, s, e)
		kill(t, s, "boom")
		park(t, h, s, "billing", e, "fail")
		for _, p := range []string{"/", "/dead", "/dead/event?" + q("id", e.ID), "/inbox", "/inbox/event?" + q("consumer", "billing", "id", e.ID)} {
			page := get(t, c, p)
			for _, action := range []string{`id="replay"`, `id="purge"`, "replay-all", "purge-all", "Replay all parked", `method="post"`} {
				must(t, !strings.Contains(page, action), "read-only page %s offers %s", p, action)
			}
			must(t, strings.Contains(page, "read-only"), "read-only page %s does not say so", p)
		}
		for _, p := range []string{"/api/dead/replay?" + q("event_id", e.ID), "/api/dead/purge?" + q("event_id", e.ID), "/api/inbox/replay?" + q("consumer", "billing", "event_id", e.ID)} {
			w := do(t, c, req{method: "POST", path: p, header: map[string]string{"Content-Type": "application/json"}})
			must(t, w.Code == http.StatusForbidden && strings.Contains(w.Body.String(), "read-only"), "POST %s: %d %s", p, w.Code, w.Body.String())
		}
		w := do(t, c, req{path: "/api/dead/event?" + q("id", e.ID)})
		must(t, w.Code == http.StatusOK, "the row must still be dead: %d", w.Code)
	}(t, storeenv.SQLite{}, openSQLite(t))
}
