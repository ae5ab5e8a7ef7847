package console

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/store"
)

// maxLimit bounds a page, as the CLI's --limit does in practice.
const maxLimit = 1000

// badRequest is a filter or parameter the console refuses (400).
type badRequest struct{ param, reason string }

func (e *badRequest) Error() string { return fmt.Sprintf("parameter %s: %s", e.param, e.reason) }

// deadQuery is the dead-letter list's query: the CLI's filters plus error
// text, and the keyset page.
type deadQuery struct {
	Filter store.Filter
	All    bool  // all=1: the bulk actions' explicit "every dead row"
	MaxID  int64 // max_id: the highest id counted, bounding a bulk action
}

// parseDead reads the query parameters event_id, aggregate_type,
// aggregate_id, event_type, since, until, error, limit, before, after, all
// and max_id. Unknown values are errors, not an empty list.
func (c *Console) parseDead(v url.Values) (deadQuery, error) {
	v, err := unhex(v)
	if err != nil {
		return deadQuery{}, err
	}
	q := deadQuery{Filter: store.Filter{Status: txbox.StatusDead, Limit: c.o.PageSize, Desc: true}}
	f := &q.Filter
	for _, s := range v["event_id"] {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				f.EventIDs = append(f.EventIDs, id)
			}
		}
	}
	f.AggregateType = v.Get("aggregate_type")
	f.AggregateID = v.Get("aggregate_id")
	f.EventType = v.Get("event_type")
	f.ErrorContains = v.Get("error")
	if f.Since, f.Until, f.Limit, err = c.parseWindow(v); err != nil {
		return q, err
	}
	if f.BeforeID, err = parseID(v.Get("before"), "before"); err != nil {
		return q, err
	}
	if f.AfterID, err = parseID(v.Get("after"), "after"); err != nil {
		return q, err
	}
	if q.MaxID, err = parseID(v.Get("max_id"), "max_id"); err != nil {
		return q, err
	}
	switch v.Get("all") {
	case "", "0", "false":
	case "1", "true":
		q.All = true
	default:
		return q, &badRequest{"all", fmt.Sprintf("%q: want 1 or 0", v.Get("all"))}
	}
	return q, nil
}

// empty reports whether the query selects rows by nothing but status.
func (q deadQuery) empty() bool {
	f := q.Filter
	return len(f.EventIDs) == 0 && f.AggregateType == "" && f.AggregateID == "" && f.EventType == "" &&
		f.ErrorContains == "" && f.Since.IsZero() && f.Until.IsZero()
}

// values renders the filter back into query parameters (no paging), for
// links and the confirmation form.
func (q deadQuery) values() url.Values {
	v := url.Values{}
	f := q.Filter
	if len(f.EventIDs) > 0 {
		v.Set("event_id", strings.Join(f.EventIDs, ","))
	}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("aggregate_type", f.AggregateType)
	set("aggregate_id", f.AggregateID)
	set("event_type", f.EventType)
	set("error", f.ErrorContains)
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		v.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.All {
		v.Set("all", "1")
	}
	return v
}

// parseWindow reads the parameters both listings take: since, until and
// limit (the page size when absent).
func (c *Console) parseWindow(v url.Values) (since, until time.Time, limit int, err error) {
	if since, err = parseWhen(v.Get("since"), "since"); err != nil {
		return
	}
	if until, err = parseWhen(v.Get("until"), "until"); err != nil {
		return
	}
	limit, err = parseLimit(v.Get("limit"), c.o.PageSize)
	return
}

// parseWhen reads RFC 3339 or a duration ago ("2h"), as the CLI does.
func parseWhen(s, param string) (time.Time, error) {
	t, ok := adminview.ParseWhen(s)
	if !ok {
		return t, &badRequest{param, fmt.Sprintf("%q is neither RFC 3339 nor a duration like 2h", s)}
	}
	return t, nil
}

func parseLimit(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, &badRequest{"limit", fmt.Sprintf("%q: want a number from 1 to %d", s, maxLimit)}
	}
	return n, nil
}

func parseID(s, param string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, &badRequest{param, fmt.Sprintf("%q: want a positive id", s)}
	}
	return n, nil
}

// inboxQuery selects parked inbox rows.
type inboxQuery struct {
	Filter store.InboxFilter
	All    bool
}

func (c *Console) parseInbox(v url.Values) (inboxQuery, error) {
	v, err := unhex(v)
	if err != nil {
		return inboxQuery{}, err
	}
	q := inboxQuery{Filter: store.InboxFilter{Consumer: v.Get("consumer"), Status: txbox.StatusDead}}
	f := &q.Filter
	for _, s := range v["event_id"] {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				f.EventIDs = append(f.EventIDs, id)
			}
		}
	}
	if st := v.Get("status"); st != "" {
		switch txbox.Status(st) {
		case txbox.StatusDead, txbox.StatusRetry, txbox.StatusReplay, txbox.StatusProcessing, txbox.StatusProcessed, txbox.StatusSkipped:
			f.Status = txbox.Status(st)
		default:
			return q, &badRequest{"status", fmt.Sprintf("%q: want DEAD, RETRY, REPLAY, PROCESSING, PROCESSED or SKIPPED", st)}
		}
	}
	if f.Since, f.Until, f.Limit, err = c.parseWindow(v); err != nil {
		return q, err
	}
	q.All = v.Get("all") == "1"
	return q, nil
}

// unhex decodes every NAME_hex parameter into NAME. The pages' forms carry
// producer-written values (event ids, consumer names, filters) hex-encoded,
// so no such text, control characters included, sits in an attribute.
func unhex(v url.Values) (url.Values, error) {
	var out url.Values
	for k, vs := range v {
		name, ok := strings.CutSuffix(k, "_hex")
		if !ok {
			continue
		}
		if out == nil {
			out = url.Values{}
			for k2, vs2 := range v {
				out[k2] = vs2
			}
		}
		for _, s := range vs {
			b, err := hex.DecodeString(s)
			if err != nil {
				return nil, &badRequest{k, "not hex"}
			}
			out.Add(name, string(b))
		}
	}
	if out == nil {
		return v, nil
	}
	return out, nil
}
