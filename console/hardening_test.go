package console_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
)

const token = "0123456789abcdef-console"

// A token shorter than console.MinTokenLength is refused.
func TestTokenMinimumLength(t *testing.T) {
	for _, tok := range []string{"x", "s3cret", strings.Repeat("a", console.MinTokenLength-1)} {
		_, err := console.New(openSQLite(t), console.Options{Token: tok, Logger: quiet()})
		if !errors.Is(err, txbox.ErrConfig) || !strings.Contains(err.Error(), strconv.Itoa(console.MinTokenLength)) {
			t.Fatalf("token of %d characters: %v, want a config error naming %d", len(tok), err, console.MinTokenLength)
		}
	}
	newConsole(t, openSQLite(t), console.Options{Token: strings.Repeat("a", console.MinTokenLength)})
}

// Before the token is given, nothing says what the console is connected
// to: not the login page, not a refusal, not a page of a console without a
// token asked from another machine.
func TestNoDatabaseDetailsBeforeLogin(t *testing.T) {
	const db = "postgres://app:xxxxx@db.internal:5432/shop"
	remote := "10.0.0.7:4000"
	c := newConsole(t, openSQLite(t), console.Options{Token: token, Database: db, WrongTokenDelay: -1})
	for _, r := range []req{
		{path: "/login", remote: remote},
		{path: "/login", remote: "127.0.0.1:4000"},
		{method: "POST", path: "/login", form: url.Values{"token": {"wrong"}}, remote: remote},
		{path: "/api/overview", remote: remote},
		{path: "/dead", remote: remote, header: map[string]string{"Authorization": "Bearer wrong"}},
	} {
		w := do(t, c, r)
		if strings.Contains(w.Body.String(), "db.internal") {
			t.Fatalf("%s %s without the token shows the database (%d):\n%s", r.method, r.path, w.Code, w.Body.String())
		}
	}
	w := do(t, c, req{path: "/", remote: remote, header: map[string]string{"Authorization": "Bearer " + token}})
	must(t, w.Code == http.StatusOK && strings.Contains(w.Body.String(), "db.internal"), "with the token the header names the database: %d", w.Code)

	open := newConsole(t, openSQLite(t), console.Options{Database: db})
	w = do(t, open, req{path: "/", remote: remote})
	must(t, w.Code == http.StatusForbidden && !strings.Contains(w.Body.String(), "db.internal"), "a refused client sees the database: %d\n%s", w.Code, w.Body.String())
	w = do(t, open, req{path: "/"})
	must(t, w.Code == http.StatusOK && strings.Contains(w.Body.String(), "db.internal"), "a loopback client of a console without a token: %d", w.Code)
}

// The login cookie holds a value derived from the token, not the token;
// the token itself as a cookie is refused.
func TestSessionCookieIsNotTheToken(t *testing.T) {
	c := newConsole(t, openSQLite(t), console.Options{Token: token, WrongTokenDelay: -1})
	w := do(t, c, req{method: "POST", path: "/login", form: url.Values{"token": {token}}})
	ck := w.Result().Cookies()
	must(t, w.Code == http.StatusSeeOther && len(ck) == 1, "login: %d %v", w.Code, ck)
	must(t, !strings.Contains(ck[0].Value, token) && len(ck[0].Value) >= 32, "the cookie holds the token: %q", ck[0].Value)
	w = do(t, c, req{path: "/", header: map[string]string{"Cookie": ck[0].Name + "=" + ck[0].Value}})
	must(t, w.Code == http.StatusOK, "session cookie: %d", w.Code)
	w = do(t, c, req{path: "/", header: map[string]string{"Cookie": ck[0].Name + "=" + token}})
	must(t, w.Code == http.StatusSeeOther, "the token as a cookie: %d, want the login redirect", w.Code)
	// Another console with the same token (a replica, a restart) takes it.
	other := newConsole(t, openSQLite(t), console.Options{Token: token})
	w = do(t, other, req{path: "/", header: map[string]string{"Cookie": ck[0].Name + "=" + ck[0].Value}})
	must(t, w.Code == http.StatusOK, "the same token's session on another console: %d", w.Code)
}

// Wrong tokens are answered one per WrongTokenDelay, all clients together,
// whether they come as a login, a bearer or a cookie; the right token is
// answered at once.
func TestWrongTokensAreSlowedDown(t *testing.T) {
	const delay = 300 * time.Millisecond
	c := newConsole(t, openSQLite(t), console.Options{Token: token, WrongTokenDelay: delay})
	remote := "10.0.0.7:4000"
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w interface{ Result() *http.Response }
			switch i % 3 {
			case 0:
				w = do(t, c, req{method: "POST", path: "/login", form: url.Values{"token": {"guess-" + strconv.Itoa(i)}}, remote: remote})
			case 1:
				w = do(t, c, req{path: "/api/overview", remote: remote, header: map[string]string{"Authorization": "Bearer guess"}})
			default:
				w = do(t, c, req{path: "/api/overview", remote: remote, header: map[string]string{"Cookie": "txbox_console=guess"}})
			}
			if code := w.Result().StatusCode; code != http.StatusUnauthorized {
				t.Errorf("wrong token %d: %d, want 401", i, code)
			}
		}()
	}
	wg.Wait()
	if took := time.Since(start); took < 6*delay {
		t.Fatalf("6 wrong tokens answered in %v, want at least %v (one per %v)", took, 6*delay, delay)
	}
	w := do(t, c, req{path: "/api/overview", remote: remote, header: map[string]string{"Authorization": "Bearer " + token}})
	must(t, w.Code == http.StatusOK, "right token after the guesses: %d", w.Code)
}

// Secrets quoted in errors are hidden by internal/redact, in every shape
// it knows: a password with a '/', a NATS token, a Redis password as the
// user part, a MySQL DSN.
func TestErrorsRedactedLikeTheCLI(t *testing.T) {
	s := openSQLite(t)
	c := newConsole(t, s, console.Options{})
	leaks := []string{
		"dial postgres://app:pa/ss@db:5432/shop failed",
		"nats: no servers: nats://s3cretToken@10.0.0.1:4222",
		"redis: dial redis://hunter2@cache:6379/0: timeout",
		"Error 1045: app:hunter2@tcp(127.0.0.1:3306)/shop",
	}
	var evs []txbox.Event
	for i := range leaks {
		evs = append(evs, ev("leak", i))
	}
	write(t, storeenv.SQLite{}, s, evs...)
	recs := kill(t, s, leaks...)
	park(t, storeenv.SQLite{}, s, "billing", ev("parked", 1), "handler: "+leaks[1]+"; "+leaks[3])
	paths := []string{"/dead", "/api/dead", "/inbox?consumer=billing", "/api/inbox?consumer=billing"}
	for _, r := range recs {
		paths = append(paths, "/dead/event?"+q("id", r.EventID), "/api/dead/event?"+q("id", r.EventID))
	}
	for _, p := range paths {
		body := get(t, c, p)
		for _, secret := range []string{"pa/ss", "s3cretToken", "hunter2"} {
			if strings.Contains(body, secret) {
				t.Fatalf("GET %s shows %q:\n%s", p, secret, body)
			}
		}
	}
	must(t, strings.Contains(get(t, c, "/api/dead"), "redis://xxxxx@cache:6379/0"), "the redacted URL is still shown")
}

// logTo returns a logger writing text lines to a buffer.
func logTo() (*slog.Logger, *testenv.SyncBuffer) {
	b := &testenv.SyncBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

var purgeForm = regexp.MustCompile(`<form method="post" action="[^"]*/dead/purge"`)

// A purge from the event page is confirmed first, as a bulk one is: the
// page links to the confirmation, a POST without its max_id is refused and
// changes nothing. A list of event ids is bounded by max_id like a filter.
// Every action's audit line names the event ids and the client's address.
func TestDestructiveActionsConfirmedBoundedAudited(t *testing.T) {
	s := openSQLite(t)
	log, lines := logTo()
	c := newConsole(t, s, console.Options{Token: token, Logger: log})
	// Every request comes from another machine, with the token.
	as := func(remote string, r req) req {
		r.remote, r.host = remote, "txbox.internal"
		r.header = map[string]string{"Authorization": "Bearer " + token}
		if r.form == nil && r.method == "POST" {
			r.header["Content-Type"] = "application/json"
		}
		return r
	}
	page := func(path string) string {
		t.Helper()
		w := do(t, c, as("10.1.2.3:5555", req{path: path}))
		must(t, w.Code == http.StatusOK, "GET %s: %d %s", path, w.Code, w.Body.String())
		return w.Body.String()
	}
	e1, e2, e3 := ev("a", 1), ev("b", 1), ev("c", 1)
	write(t, storeenv.SQLite{}, s, e1, e2, e3)
	recs := kill(t, s, "one", "two", "three")
	event := page("/dead/event?" + q("id", e1.ID))
	must(t, !purgeForm.MatchString(event), "the event page purges without a confirmation:\n%s", event)
	must(t, strings.Contains(event, `action="/dead/confirm"`) && strings.Contains(event, `id="purge"`), "the event page has no way to a confirmed purge:\n%s", event)

	// A page purge without the confirmation's max_id: refused.
	w := do(t, c, as("10.1.2.3:5555", req{method: "POST", path: "/dead/purge", form: url.Values{"event_id": {e1.ID}}}))
	must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "max_id"), "unconfirmed purge: %d %s", w.Code, w.Body.String())
	page("/api/dead/event?" + q("id", e1.ID))

	// The confirmation page counts the one event and posts its max_id.
	confirm := page("/dead/confirm?" + q("action", "purge", "event_id", e1.ID))
	m := regexp.MustCompile(`name="max_id" value="(\d+)"`).FindStringSubmatch(confirm)
	must(t, m != nil && strings.Contains(confirm, `id="count">1<`), "confirmation page:\n%s", confirm)
	w = do(t, c, as("10.1.2.3:5555", req{method: "POST", path: "/dead/purge", form: url.Values{"event_id": {e1.ID}, "max_id": {m[1]}}}))
	must(t, w.Code == http.StatusSeeOther && strings.Contains(w.Header().Get("Location"), "rows=1"), "confirmed purge: %d %v", w.Code, w.Header())

	// A list of ids without max_id is a bulk action: refused.
	ids := e2.ID + "," + e3.ID
	w = do(t, c, as("10.1.2.3:5555", req{method: "POST", path: "/api/dead/purge?" + q("event_id", ids)}))
	must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "max_id"), "id list without max_id: %d %s", w.Code, w.Body.String())
	page("/api/dead/event?" + q("id", e2.ID))
	many := strings.TrimSuffix(strings.Repeat(e2.ID+",", 1001), ",")
	w = do(t, c, as("10.1.2.3:5555", req{method: "POST", path: "/api/dead/purge?" + q("event_id", many, "max_id", "99")}))
	must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "parameter event_id"), "1001 ids: %d %s", w.Code, w.Body.String())
	w = do(t, c, as("[2001:db8::7]:6000", req{method: "POST", path: "/api/dead/replay?" + q("event_id", ids, "max_id", strconv.FormatInt(recs[2].ID, 10))}))
	must(t, w.Code == http.StatusOK && strings.Contains(w.Body.String(), `"rows": 2`), "id list with max_id: %d %s", w.Code, w.Body.String())

	out := lines.String()
	must(t, !strings.Contains(out, "purgeed"), "audit line typo:\n%s", out)
	for _, want := range []string{
		`msg="console: dead letters purged" rows=1 client=10.1.2.3 event_ids=` + e1.ID,
		`msg="console: dead letters replayed" rows=2 client=2001:db8::7 event_ids=` + ids,
	} {
		must(t, strings.Contains(out, want), "no audit line %q in:\n%s", want, out)
	}
}
