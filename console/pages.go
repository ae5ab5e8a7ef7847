package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// page is what every template gets: the view in Data plus the frame.
type page struct {
	Title    string
	Base     string
	CSRF     string
	ReadOnly bool
	Database string
	Done     string // what the last action did, from a fixed list
	Data     any
}

var pageNames = []string{"overview", "dead", "dead_event", "dead_confirm", "inbox", "inbox_event", "inbox_confirm", "find", "login", "error"}

func parsePages(c *Console) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"t":      controlPictures,
		"pre":    blockText,
		"pretty": func(b jsonBytes) string { return blockText(prettyJSON(b)) },
		"ts":     formatTime,
		"age":    func(s float64) string { return (time.Duration(s * float64(time.Second))).Round(time.Second).String() },
		"link":   func(path string, v url.Values) string { return c.o.BasePath + path + "?" + v.Encode() },
		"qs":     qs,
		"hex":    func(s string) string { return hex.EncodeToString([]byte(s)) },
		"chart":  makeChart,
	}
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// qs returns a copy of v with key set (or removed when val is "").
func qs(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			out.Del(kv[i])
		} else {
			out.Set(kv[i], kv[i+1])
		}
	}
	return out
}

func formatTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05.000Z")
	case *time.Time:
		if v == nil {
			return "-"
		}
		return formatTime(*v)
	}
	return "-"
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Base: c.o.BasePath, CSRF: c.csrf, ReadOnly: c.o.ReadOnly, Data: data}
	if known(r) {
		// What the console is connected to is for those who may use it:
		// not on the login page, nor on a refusal.
		p.Database = c.o.Database
	}
	if n, err := strconv.ParseInt(r.URL.Query().Get("rows"), 10, 64); err == nil {
		switch r.URL.Query().Get("done") {
		case "replay":
			p.Done = fmt.Sprintf("Replayed %d event(s).", n)
		case "purge":
			p.Done = fmt.Sprintf("Purged %d event(s).", n)
		case "inbox-replay":
			p.Done = fmt.Sprintf("Replay requested for %d parked event(s); the consumer applies them on its next replay check.", n)
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "render error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error: JSON under /api/, a page elsewhere.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if isAPI(r) {
		writeError(w, status, msg)
		return
	}
	c.render(w, r, status, "error", http.StatusText(status), struct {
		Status  int
		Message string
	}{status, msg})
}

func (c *Console) pageError(w http.ResponseWriter, r *http.Request, err error) {
	c.fail(w, r, statusOf(err), redact(err.Error()))
}

// loadPage reads a listing page's query with parse and its view with load;
// on an error it has shown the error page, and ok is false.
func loadPage[Q, V any](c *Console, w http.ResponseWriter, r *http.Request, parse func(url.Values) (Q, error), load func(context.Context, Q) (V, error)) (q Q, v V, ok bool) {
	q, err := parse(r.URL.Query())
	if err == nil {
		v, err = load(r.Context(), q)
	}
	if err != nil {
		c.pageError(w, r, err)
		return q, v, false
	}
	return q, v, true
}

func (c *Console) pageOverview(w http.ResponseWriter, r *http.Request) {
	v, err := c.overview(r.Context())
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", v)
}

type deadPageData struct {
	Q      url.Values // the filter, without paging
	Page   deadPageView
	Filter deadQuery
}

func (c *Console) pageDead(w http.ResponseWriter, r *http.Request) {
	q, v, ok := loadPage(c, w, r, c.parseDead, c.deadPage)
	if !ok {
		return
	}
	vals := q.values()
	if l := r.URL.Query().Get("limit"); l != "" {
		vals.Set("limit", l)
	}
	c.render(w, r, http.StatusOK, "dead", "Dead letters", deadPageData{Q: vals, Page: v, Filter: q})
}

func (c *Console) pageDeadEvent(w http.ResponseWriter, r *http.Request) {
	v, err := c.deadEvent(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "dead_event", "Dead event", v)
}

type confirmData struct {
	Action string
	Q      url.Values
	Count  countView
}

func (c *Console) pageDeadConfirm(w http.ResponseWriter, r *http.Request) {
	a := action(r.URL.Query().Get("action"))
	if a != actionReplay && a != actionPurge {
		c.pageError(w, r, &badRequest{"action", "want replay or purge"})
		return
	}
	q, err := c.parseDead(r.URL.Query())
	if err == nil && q.empty() && !q.All {
		err = &badRequest{"filter", "give a filter, or all=1 for every dead row"}
	}
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	n, err := c.deadCount(r.Context(), q)
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "dead_confirm", "Confirm "+string(a), confirmData{Action: string(a), Q: q.values(), Count: n})
}

func (c *Console) postDead(a action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			c.pageError(w, r, &badRequest{"form", err.Error()})
			return
		}
		q, err := c.parseDead(r.PostForm)
		if err == nil && a == actionPurge && q.MaxID == 0 {
			// A purge from the pages, of one event too, is confirmed on
			// the confirmation page, which passes the max_id it counted.
			err = &badRequest{"max_id", "a purge is confirmed first: open /dead/confirm?action=purge with the filter or event_id"}
		}
		if err != nil {
			c.pageError(w, r, err)
			return
		}
		v, err := c.deadAction(r.Context(), a, q, clientAddr(r))
		if err != nil {
			c.pageError(w, r, err)
			return
		}
		done := url.Values{"done": {string(a)}, "rows": {strconv.FormatInt(v.Rows, 10)}}
		if len(q.Filter.EventIDs) == 1 && a == actionReplay {
			done.Set("id", q.Filter.EventIDs[0])
			http.Redirect(w, r, c.o.BasePath+"/find?"+done.Encode(), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, c.o.BasePath+"/dead?"+done.Encode(), http.StatusSeeOther)
	}
}

type inboxPageData struct {
	Q    url.Values
	Page inboxPageView
}

func (c *Console) pageInbox(w http.ResponseWriter, r *http.Request) {
	q, v, ok := loadPage(c, w, r, c.parseInbox, c.inboxPage)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "inbox", "Inbox", inboxPageData{Q: url.Values{"consumer": {q.Filter.Consumer}}, Page: v})
}

func (c *Console) pageInboxEvent(w http.ResponseWriter, r *http.Request) {
	v, err := c.inboxEvent(r.Context(), r.URL.Query().Get("consumer"), r.URL.Query().Get("id"))
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "inbox_event", "Inbox event", v)
}

func (c *Console) pageInboxConfirm(w http.ResponseWriter, r *http.Request) {
	consumer := r.URL.Query().Get("consumer")
	if consumer == "" {
		c.pageError(w, r, &badRequest{"consumer", "required"})
		return
	}
	cons, err := c.consumers(r.Context())
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	var n int64
	for _, cv := range cons {
		if cv.Consumer == consumer {
			n = cv.Parked
		}
	}
	c.render(w, r, http.StatusOK, "inbox_confirm", "Confirm replay", struct {
		Consumer string
		Count    int64
	}{consumer, n})
}

func (c *Console) postInboxReplay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.pageError(w, r, &badRequest{"form", err.Error()})
		return
	}
	q, err := c.parseInbox(r.PostForm)
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	v, err := c.inboxReplay(r.Context(), q, clientAddr(r))
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	done := url.Values{"done": {"inbox-replay"}, "rows": {strconv.FormatInt(v.Rows, 10)}}
	if len(q.Filter.EventIDs) == 1 {
		done.Set("id", q.Filter.EventIDs[0])
		http.Redirect(w, r, c.o.BasePath+"/find?"+done.Encode(), http.StatusSeeOther)
		return
	}
	done.Set("consumer", q.Filter.Consumer)
	http.Redirect(w, r, c.o.BasePath+"/inbox?"+done.Encode(), http.StatusSeeOther)
}

func (c *Console) pageFind(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		c.render(w, r, http.StatusOK, "find", "Find an event", nil)
		return
	}
	v, err := c.find(r.Context(), id)
	if err != nil {
		c.pageError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "find", "Find an event", &v)
}

func (c *Console) pageLogin(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", "Log in", struct{ Wrong bool }{})
}

// postLogin sets a value derived from the token (sessionValue) as an
// HttpOnly, SameSite=Strict cookie, so the browser sends it with the
// console's own requests only; over TLS the cookie is Secure. A wrong
// token is answered after the guess delay.
func (c *Console) postLogin(w http.ResponseWriter, r *http.Request) {
	if c.o.Token == "" {
		http.Redirect(w, r, c.o.BasePath+"/", http.StatusSeeOther)
		return
	}
	if !equal(r.PostFormValue("token"), c.o.Token) {
		c.guesses.wait(r.Context())
		c.render(w, r, http.StatusUnauthorized, "login", "Log in", struct{ Wrong bool }{true})
		return
	}
	path := c.o.BasePath
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.session, Path: path, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, c.o.BasePath+"/", http.StatusSeeOther)
}
