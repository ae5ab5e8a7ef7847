package console_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/store"
)

type deadPage struct {
	Rows []struct {
		ID        int64  `json:"id"`
		EventID   string `json:"event_id"`
		LastError string `json:"last_error"`
		Status    string `json:"status"`
	} `json:"rows"`
	Next int64 `json:"next_before"`
	Prev int64 `json:"prev_after"`
}

func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	w := do(t, h, req{path: path})
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, w.Body.String())
	}
}

func pageIDs(p deadPage) []int64 {
	var out []int64
	for _, r := range p.Rows {
		out = append(out, r.ID)
	}
	return out
}

// Every route on every store: the overview, the dead-letter list with its
// filters and keyset pages, details, the count and the bounded bulk
// actions, the inbox, find, and 400 for every bad filter.
func TestRoutes(t *testing.T) {
	eachStore(t, func(t *testing.T, h harness, s store.Store) {
		c := newConsole(t, s, console.Options{PageSize: 2})
		d1, d2, d3 := ev("d1", 1), ev("d2", 1), ev("d3", 1)
		write(t, h, s, d1, d2, d3)
		dead := kill(t, s, "boom one", "BOOM two", "other")
		write(t, h, s, ev("p1", 1), ev("p2", 1), ev("p3", 1))
		parked := ev("i1", 1)
		park(t, h, s, "billing", parked, "handler failed")

		// Overview: counts, backlog, relays seen, consumers.
		var ov struct {
			Counts    map[string]int64 `json:"counts"`
			Backlog   int64            `json:"backlog"`
			Dead      int64            `json:"dead"`
			Consumers []struct {
				Consumer string `json:"consumer"`
				Parked   int64  `json:"parked"`
			} `json:"inbox_consumers"`
			Samples []any `json:"samples"`
		}
		getJSON(t, c, "/api/overview", &ov)
		must(t, ov.Backlog == 3 && ov.Dead == 3 && ov.Counts["PENDING"] == 3, "overview: %+v", ov)
		must(t, len(ov.Consumers) == 1 && ov.Consumers[0].Consumer == "billing" && ov.Consumers[0].Parked == 1, "consumers: %+v", ov.Consumers)
		must(t, len(ov.Samples) >= 1, "no sample taken for the chart")
		page := get(t, c, "/")
		must(t, strings.Contains(page, `id="backlog"><span class="n">3</span>`), "overview page lacks the backlog:\n%s", page)
		must(t, strings.Contains(page, "<svg"), "overview page lacks the chart")

		// Dead list: newest first, keyset pages both ways.
		var p1, p2, back deadPage
		getJSON(t, c, "/api/dead", &p1)
		must(t, len(p1.Rows) == 2 && p1.Rows[0].ID == dead[2].ID && p1.Rows[1].ID == dead[1].ID && p1.Next == dead[1].ID && p1.Prev == 0, "page 1: %+v", p1)
		getJSON(t, c, "/api/dead?before="+strconv.FormatInt(p1.Next, 10), &p2)
		must(t, len(p2.Rows) == 1 && p2.Rows[0].ID == dead[0].ID && p2.Next == 0 && p2.Prev == dead[0].ID, "page 2: %+v", p2)
		getJSON(t, c, "/api/dead?after="+strconv.FormatInt(p2.Prev, 10), &back)
		must(t, len(back.Rows) == 2 && back.Rows[0].ID == dead[2].ID && back.Rows[1].ID == dead[1].ID, "back to page 1: %v", pageIDs(back))
		var f deadPage
		getJSON(t, c, "/api/dead?error=boom&limit=10", &f)
		must(t, len(f.Rows) == 2, "error filter: %+v", f)
		getJSON(t, c, "/api/dead?event_type=Nope", &f)
		must(t, len(f.Rows) == 0, "event type filter: %+v", f)
		getJSON(t, c, "/api/dead?aggregate_type=Order&aggregate_id=d3&since=1h", &f)
		must(t, len(f.Rows) == 1 && f.Rows[0].EventID == d3.ID, "aggregate filter: %+v", f)
		getJSON(t, c, "/api/dead?until=1h", &f)
		must(t, len(f.Rows) == 0, "until filter: %+v", f)

		// Bad filters are 400 with a JSON error naming the parameter.
		for _, bad := range []string{"since=yesterday", "until=soon", "limit=0", "limit=5000", "limit=x", "before=-1", "after=x", "all=maybe", "max_id=0"} {
			for _, route := range []string{"/api/dead?", "/api/dead/count?"} {
				w := do(t, c, req{path: route + bad})
				param := strings.SplitN(bad, "=", 2)[0]
				must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), `"error": "parameter `+param), "%s%s: %d %s", route, bad, w.Code, w.Body.String())
			}
		}
		w := do(t, c, req{path: "/api/inbox?status=NOPE"})
		must(t, w.Code == http.StatusBadRequest, "inbox bad status: %d", w.Code)
		w = do(t, c, req{path: "/dead?limit=0"})
		must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "parameter limit"), "page bad filter: %d", w.Code)

		// Details.
		var det struct {
			EventID   string          `json:"event_id"`
			LastError string          `json:"last_error"`
			Payload   json.RawMessage `json:"payload"`
		}
		getJSON(t, c, "/api/dead/event?"+q("id", d1.ID), &det)
		must(t, det.EventID == d1.ID && det.LastError == "boom one" && strings.Contains(string(det.Payload), `"agg"`), "details: %+v", det)
		w = do(t, c, req{path: "/api/dead/event?id=nope"})
		must(t, w.Code == http.StatusNotFound && strings.Contains(w.Body.String(), `"error"`), "unknown id: %d %s", w.Code, w.Body.String())
		w = do(t, c, req{path: "/api/dead/event"})
		must(t, w.Code == http.StatusBadRequest, "missing id: %d", w.Code)
		page = get(t, c, "/dead/event?"+q("id", d1.ID))
		must(t, strings.Contains(page, "&#34;agg&#34;: &#34;d1&#34;") || strings.Contains(page, "&quot;agg&quot;: &quot;d1&quot;"), "details page lacks the pretty payload:\n%s", page)
		csrf := csrfOf(t, page)

		// Count, then a bulk action bounded by the count's max_id: a row
		// that dies after the count is left alone.
		var cnt struct {
			Count int64 `json:"count"`
			MaxID int64 `json:"max_id"`
		}
		getJSON(t, c, "/api/dead/count?error=boom", &cnt)
		must(t, cnt.Count == 2 && cnt.MaxID == dead[1].ID, "count: %+v", cnt)
		page = get(t, c, "/dead/confirm?action=replay&error=boom")
		must(t, strings.Contains(page, `id="count">2<`) && strings.Contains(page, `name="max_id" value="`+strconv.FormatInt(cnt.MaxID, 10)+`"`), "confirm page:\n%s", page)
		late := ev("late", 1)
		write(t, h, s, late)
		// The three pending rows are claimed too; only the late one is killed here.
		recs, err := s.Claim(t.Context(), store.ClaimRequest{Lease: "x#1", Limit: 10, LeaseFor: 60e9})
		must(t, err == nil, "claim: %v", err)
		for _, r := range recs {
			f := store.Failure{ID: r.ID, Error: "boom late", Dead: r.EventID == late.ID, Delay: 3600e9}
			if _, err := s.MarkFailed(t.Context(), "x#1", []store.Failure{f}); err != nil {
				t.Fatal(err)
			}
		}
		w = do(t, c, req{method: "POST", path: "/api/dead/replay?error=boom", header: map[string]string{"Content-Type": "application/json"}})
		must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "max_id"), "bulk without max_id: %d %s", w.Code, w.Body.String())
		w = do(t, c, req{method: "POST", path: "/api/dead/replay", header: map[string]string{"Content-Type": "application/json"}})
		must(t, w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "filter"), "bulk without filter: %d %s", w.Code, w.Body.String())
		w = do(t, c, req{method: "POST", path: "/dead/replay", form: map[string][]string{"csrf": {csrf}, "error": {"boom"}, "max_id": {strconv.FormatInt(cnt.MaxID, 10)}}})
		must(t, w.Code == http.StatusSeeOther && strings.Contains(w.Header().Get("Location"), "rows=2"), "bulk replay: %d %v", w.Code, w.Header())
		getJSON(t, c, "/api/dead/count?error=boom", &cnt)
		must(t, cnt.Count == 1, "after the bounded replay the late row must still be dead: %+v", cnt)
		page = get(t, c, w.Header().Get("Location"))
		must(t, strings.Contains(page, "Replayed 2 event(s)."), "no result message:\n%s", page)

		// Find: the replayed event is back in the queue.
		var fv struct {
			Outbox []struct{ Status string } `json:"outbox"`
			Inbox  []struct{ Status, Consumer string }
		}
		getJSON(t, c, "/api/find?"+q("id", d1.ID), &fv)
		must(t, len(fv.Outbox) == 1 && fv.Outbox[0].Status == "PENDING", "find replayed: %+v", fv)
		getJSON(t, c, "/api/find?"+q("id", parked.ID), &fv)
		must(t, len(fv.Outbox) == 0 && len(fv.Inbox) == 1 && fv.Inbox[0].Status == "DEAD" && fv.Inbox[0].Consumer == "billing", "find parked: %+v", fv)
		get(t, c, "/find?"+q("id", d1.ID))
		get(t, c, "/find")
		w = do(t, c, req{path: "/api/find"})
		must(t, w.Code == http.StatusBadRequest, "find without id: %d", w.Code)

		// Purge one over the API, with its JSON content type as CSRF proof.
		w = do(t, c, req{method: "POST", path: "/api/dead/purge?" + q("event_id", d3.ID), header: map[string]string{"Content-Type": "application/json"}})
		must(t, w.Code == http.StatusOK && strings.Contains(w.Body.String(), `"rows": 1`), "purge one: %d %s", w.Code, w.Body.String())
		w = do(t, c, req{path: "/api/dead/event?" + q("id", d3.ID)})
		must(t, w.Code == http.StatusNotFound, "purged row still there: %d", w.Code)

		// Inbox: list, details, confirm, replay of one.
		var ib struct {
			Rows []struct {
				EventID  string `json:"event_id"`
				Consumer string `json:"consumer"`
				Status   string `json:"status"`
			} `json:"rows"`
		}
		getJSON(t, c, "/api/inbox?consumer=billing", &ib)
		must(t, len(ib.Rows) == 1 && ib.Rows[0].EventID == parked.ID, "inbox: %+v", ib)
		var ie struct {
			Status  string          `json:"status"`
			Error   string          `json:"error_message"`
			Payload json.RawMessage `json:"payload"`
		}
		getJSON(t, c, "/api/inbox/event?"+q("consumer", "billing", "id", parked.ID), &ie)
		must(t, ie.Status == "DEAD" && ie.Error == "handler failed" && strings.Contains(string(ie.Payload), `"i1"`), "inbox event: %+v", ie)
		get(t, c, "/inbox")
		page = get(t, c, "/inbox/event?"+q("consumer", "billing", "id", parked.ID))
		must(t, strings.Contains(page, `id="replay"`), "inbox event page lacks replay")
		page = get(t, c, "/inbox/confirm?consumer=billing")
		must(t, strings.Contains(page, `id="count">1<`), "inbox confirm:\n%s", page)
		w = do(t, c, req{method: "POST", path: "/api/inbox/replay?consumer=billing", header: map[string]string{"Content-Type": "application/json"}})
		must(t, w.Code == http.StatusBadRequest, "inbox bulk replay without all=1: %d", w.Code)
		w = do(t, c, req{method: "POST", path: "/inbox/replay", form: map[string][]string{"csrf": {csrf}, "consumer": {"billing"}, "event_id": {parked.ID}}})
		must(t, w.Code == http.StatusSeeOther, "inbox replay: %d %s", w.Code, w.Body.String())
		getJSON(t, c, "/api/inbox/event?"+q("consumer", "billing", "id", parked.ID), &ie)
		must(t, ie.Status == string(txbox.StatusReplay), "inbox row after replay: %+v", ie)

		// Unknown API routes answer JSON 404.
		w = do(t, c, req{path: "/api/nope"})
		must(t, w.Code == http.StatusNotFound && strings.Contains(w.Body.String(), `"error"`), "unknown route: %d", w.Code)
	})
}
