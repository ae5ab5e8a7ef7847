package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/txbox/txbox"
)

// The JSON API: the same views the pages render. docs/console.md lists
// the routes.

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type errorJSON struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorJSON{Error: msg})
}

// statusOf maps an error to the HTTP status the API answers with.
func statusOf(err error) int {
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest
	case errors.Is(err, txbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errNoInbox):
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// answer writes v, or err as {"error": ...} with its status.
func (c *Console) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		c.fail(w, r, statusOf(err), redact(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (c *Console) apiOverview(w http.ResponseWriter, r *http.Request) {
	v, err := c.overview(r.Context())
	c.answer(w, r, v, err)
}

// answerQuery answers a request on the query parse reads with what do
// returns for it.
func answerQuery[Q, V any](c *Console, w http.ResponseWriter, r *http.Request, parse func(url.Values) (Q, error), do func(context.Context, Q) (V, error)) {
	q, err := parse(r.URL.Query())
	if err != nil {
		c.answer(w, r, nil, err)
		return
	}
	v, err := do(r.Context(), q)
	c.answer(w, r, v, err)
}

func (c *Console) apiDead(w http.ResponseWriter, r *http.Request) {
	answerQuery(c, w, r, c.parseDead, c.deadPage)
}

func (c *Console) apiDeadCount(w http.ResponseWriter, r *http.Request) {
	answerQuery(c, w, r, c.parseDead, c.deadCount)
}

func (c *Console) apiDeadEvent(w http.ResponseWriter, r *http.Request) {
	v, err := c.deadEvent(r.Context(), r.URL.Query().Get("id"))
	c.answer(w, r, v, err)
}

func (c *Console) apiDeadAction(a action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answerQuery(c, w, r, c.parseDead, func(ctx context.Context, q deadQuery) (actionView, error) {
			return c.deadAction(ctx, a, q, clientAddr(r))
		})
	}
}

func (c *Console) apiInbox(w http.ResponseWriter, r *http.Request) {
	answerQuery(c, w, r, c.parseInbox, c.inboxPage)
}

func (c *Console) apiInboxEvent(w http.ResponseWriter, r *http.Request) {
	v, err := c.inboxEvent(r.Context(), r.URL.Query().Get("consumer"), r.URL.Query().Get("id"))
	c.answer(w, r, v, err)
}

func (c *Console) apiInboxReplay(w http.ResponseWriter, r *http.Request) {
	answerQuery(c, w, r, c.parseInbox, func(ctx context.Context, q inboxQuery) (actionView, error) {
		return c.inboxReplay(ctx, q, clientAddr(r))
	})
}

func (c *Console) apiFind(w http.ResponseWriter, r *http.Request) {
	v, err := c.find(r.Context(), r.URL.Query().Get("id"))
	c.answer(w, r, v, err)
}
