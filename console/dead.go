package console

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Dead letters: keyset pages, details, the count and the bounded bulk
// actions.

type deadPageView struct {
	Rows []recordView `json:"rows"`
	// Next is the "before" of the next (older) page, Prev the "after" of
	// the previous (newer) one; absent at either end.
	Next  int64 `json:"next_before,omitempty"`
	Prev  int64 `json:"prev_after,omitempty"`
	Limit int   `json:"limit"`
}

// deadPage lists newest first, by keyset: before=<id> reads the page after
// a row, after=<id> the page before it.
func (c *Console) deadPage(ctx context.Context, q deadQuery) (deadPageView, error) {
	f := q.Filter
	limit := f.Limit
	f.Limit = limit + 1 // one more tells whether there is a page beyond
	back := f.AfterID > 0 && f.BeforeID == 0
	if back {
		f.Desc = false
	}
	recs, err := c.s.List(ctx, f)
	if err != nil {
		return deadPageView{}, err
	}
	more := len(recs) > limit
	if more {
		recs = recs[:limit]
	}
	if back {
		slices.Reverse(recs)
	}
	v := deadPageView{Rows: make([]recordView, len(recs)), Limit: limit}
	for i, r := range recs {
		v.Rows[i] = view(r, false)
	}
	if len(recs) == 0 {
		return v, nil
	}
	first, last := recs[0].ID, recs[len(recs)-1].ID
	if back {
		if more {
			v.Prev = first
		}
		v.Next = last
	} else {
		if more {
			v.Next = last
		}
		if f.BeforeID > 0 {
			v.Prev = first
		}
	}
	return v, nil
}

func (c *Console) deadEvent(ctx context.Context, eventID string) (recordView, error) {
	if eventID == "" {
		return recordView{}, &badRequest{"id", "missing event id"}
	}
	recs, err := c.s.List(ctx, store.Filter{Status: txbox.StatusDead, EventIDs: []string{eventID}, Limit: 1})
	if err != nil {
		return recordView{}, err
	}
	if len(recs) == 0 {
		return recordView{}, fmt.Errorf("dead event %q: %w", controlPictures(eventID), txbox.ErrNotFound)
	}
	return view(recs[0], true), nil
}

type countView struct {
	Count int64 `json:"count"`
	MaxID int64 `json:"max_id"` // pass it to replay or purge: rows that die later are left alone
}

// deadCount counts the dead rows a bulk action would touch, up to the
// highest id there is now.
func (c *Console) deadCount(ctx context.Context, q deadQuery) (countView, error) {
	f := q.Filter
	f.AfterID, f.BeforeID, f.Desc, f.Limit = 0, 0, true, 1
	top, err := c.s.List(ctx, f)
	if err != nil || len(top) == 0 {
		return countView{}, err
	}
	f.BeforeID = top[0].ID + 1
	n, err := c.s.Count(ctx, f)
	return countView{Count: n, MaxID: top[0].ID}, err
}

type action string

const (
	actionReplay action = "replay"
	actionPurge  action = "purge"
)

type actionView struct {
	Action string `json:"action"`
	Rows   int64  `json:"rows"`
}

// deadAction replays or purges. Anything but one event id (a filter,
// all=1, or a list of ids) is a bulk action: it needs max_id, the highest
// id the operator was shown in the count, so rows that died since are not
// swept up unseen, and a list holds at most maxLimit ids. Every action is
// logged with what it touched and who asked (client: the remote address).
func (c *Console) deadAction(ctx context.Context, a action, q deadQuery, client string) (actionView, error) {
	f := q.Filter
	f.Status = txbox.StatusDead // replay and purge touch DEAD rows only
	f.AfterID, f.BeforeID, f.Limit, f.Desc = 0, 0, 0, false
	if len(f.EventIDs) > maxLimit {
		return actionView{}, &badRequest{"event_id", fmt.Sprintf("%d ids: at most %d at once", len(f.EventIDs), maxLimit)}
	}
	if len(f.EventIDs) != 1 {
		if q.empty() && !q.All {
			return actionView{}, &badRequest{"filter", "give event_id, aggregate_type, aggregate_id, event_type, since/until, error, or all=1"}
		}
		if q.MaxID == 0 {
			return actionView{}, &badRequest{"max_id", "required for a bulk " + string(a) + " (a filter, all=1 or more than one event_id): count first (GET /api/dead/count) and pass its max_id"}
		}
	}
	if q.MaxID > 0 {
		f.BeforeID = q.MaxID + 1
	}
	var n int64
	var err error
	switch a {
	case actionReplay:
		n, err = c.s.Replay(ctx, f)
	case actionPurge:
		n, err = c.s.Purge(ctx, f)
	}
	if err != nil {
		return actionView{}, err
	}
	attrs := []any{"rows", n, "client", client}
	if len(f.EventIDs) > 0 {
		attrs = append(attrs, "event_ids", strings.Join(f.EventIDs, ","))
	}
	if v := q.values(); len(f.EventIDs) == 0 || len(v) > 1 {
		v.Del("event_id")
		attrs = append(attrs, "filter", v.Encode())
	}
	if q.MaxID > 0 {
		attrs = append(attrs, "max_id", q.MaxID)
	}
	c.log.Info("console: dead letters "+a.done(), attrs...)
	return actionView{Action: string(a), Rows: n}, nil
}

// done is the action's past tense, for the audit line.
func (a action) done() string {
	if a == actionReplay {
		return "replayed"
	}
	return "purged"
}

// clientAddr is the address an audit line names: the connection's remote
// host. A forwarding header is not trusted: any client can send one.
func clientAddr(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
