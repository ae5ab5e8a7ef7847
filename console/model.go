package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// The views below are what both the pages and the API show: one function
// reads the store, the page renders the struct and the API encodes it.

type recordView struct {
	ID               int64      `json:"id"`
	EventID          string     `json:"event_id"`
	AggregateType    string     `json:"aggregate_type"`
	AggregateID      string     `json:"aggregate_id"`
	AggregateVersion int64      `json:"aggregate_version"`
	EventType        string     `json:"event_type"`
	Status           string     `json:"status"`
	RetryCount       int        `json:"retry_count"`
	OccurredAt       time.Time  `json:"occurred_at"`
	CreatedAt        time.Time  `json:"created_at"`
	SentAt           *time.Time `json:"sent_at,omitempty"`
	NextRetryAt      *time.Time `json:"next_retry_at,omitempty"`
	LockedBy         string     `json:"locked_by,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
	Headers          jsonBytes  `json:"headers,omitempty"`
	Payload          jsonBytes  `json:"payload,omitempty"`
}

// jsonBytes is stored JSON (or not: a foreign producer may write
// anything); the API emits it as JSON or as a string, the pages pretty.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) { return rawJSON(b), nil }

func view(r store.Record, full bool) recordView {
	v := recordView{ID: r.ID, EventID: r.EventID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		AggregateVersion: r.AggregateVersion, EventType: r.EventType, Status: string(r.Status), RetryCount: r.RetryCount,
		OccurredAt: r.OccurredAt, CreatedAt: r.CreatedAt, SentAt: r.SentAt, NextRetryAt: r.NextRetryAt,
		LockedBy: r.LockedBy, LastError: redact(r.LastError)}
	if full {
		v.Headers, v.Payload = r.Headers, r.Payload
	}
	return v
}

// --- overview

type overviewView struct {
	Counts           map[string]int64 `json:"counts"`
	Backlog          int64            `json:"backlog"`
	Dead             int64            `json:"dead"`
	OldestPendingAt  *time.Time       `json:"oldest_pending_at"`
	OldestPendingAge float64          `json:"oldest_pending_age_seconds"`
	Relays           []relaySeen      `json:"relays"`
	Consumers        []consumerView   `json:"inbox_consumers"`
	Samples          []sample         `json:"samples"`
}

type relaySeen struct {
	Relay        string     `json:"relay"`
	Delivered    int        `json:"delivered_recently"`
	Holding      int        `json:"holding"`
	LastDelivery *time.Time `json:"last_delivery,omitempty"`
}

type consumerView struct {
	Consumer string           `json:"consumer"`
	Counts   map[string]int64 `json:"counts"`
	Parked   int64            `json:"parked"`
}

var statusOrder = []txbox.Status{txbox.StatusPending, txbox.StatusProcessing, txbox.StatusRetry, txbox.StatusSent, txbox.StatusDead}

func (c *Console) overview(ctx context.Context) (overviewView, error) {
	st, err := c.freshSample(ctx)
	if err != nil {
		return overviewView{}, err
	}
	v := overviewView{Counts: map[string]int64{}, Dead: st.Dead, OldestPendingAt: st.OldestPending, OldestPendingAge: st.OldestAge.Seconds()}
	for _, k := range statusOrder {
		v.Counts[string(k)] = st.Counts[k]
	}
	v.Backlog = st.Counts[txbox.StatusPending] + st.Counts[txbox.StatusRetry] + st.Counts[txbox.StatusProcessing]
	if v.Relays, err = c.relays(ctx); err != nil {
		return v, err
	}
	if v.Consumers, err = c.consumers(ctx); err != nil {
		return v, err
	}
	v.Samples = c.sampleList()
	return v, nil
}

// relayWindow is how many of the newest ids the overview reads locked_by
// from: "seen recently" at a cost that does not grow with the table.
const relayWindow = 5000

// relays reads who delivered the newest rows and who holds leases now,
// from locked_by ("<relay id>#<claim>"). A store that claims inside a
// transaction without writing locked_by shows none.
func (c *Console) relays(ctx context.Context) ([]relaySeen, error) {
	top, err := c.s.List(ctx, store.Filter{Desc: true, Limit: 1})
	if err != nil || len(top) == 0 {
		return nil, err
	}
	after := max(top[0].ID-relayWindow, 0)
	sent, err := c.s.List(ctx, store.Filter{Status: txbox.StatusSent, AfterID: after, Desc: true, Limit: relayWindow})
	if err != nil {
		return nil, err
	}
	held, err := c.s.List(ctx, store.Filter{Status: txbox.StatusProcessing, Limit: 1000})
	if err != nil {
		return nil, err
	}
	seen := map[string]*relaySeen{}
	get := func(lease string) *relaySeen {
		id := lease
		if i := strings.LastIndexByte(lease, '#'); i > 0 {
			id = lease[:i]
		}
		if seen[id] == nil {
			seen[id] = &relaySeen{Relay: id}
		}
		return seen[id]
	}
	for _, r := range sent {
		if r.LockedBy == "" {
			continue
		}
		s := get(r.LockedBy)
		s.Delivered++
		if r.SentAt != nil && (s.LastDelivery == nil || r.SentAt.After(*s.LastDelivery)) {
			t := *r.SentAt
			s.LastDelivery = &t
		}
	}
	for _, r := range held {
		if r.LockedBy != "" {
			get(r.LockedBy).Holding++
		}
	}
	out := make([]relaySeen, 0, len(seen))
	for _, s := range seen {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Relay < out[j].Relay })
	return out, nil
}

func (c *Console) consumers(ctx context.Context) ([]consumerView, error) {
	if c.inbox == nil {
		return nil, nil
	}
	counts, err := c.inbox.InboxCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]consumerView, 0, len(counts))
	for name, m := range counts {
		cv := consumerView{Consumer: name, Counts: map[string]int64{}, Parked: m[txbox.StatusDead]}
		for k, n := range m {
			cv.Counts[string(k)] = n
		}
		out = append(out, cv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Consumer < out[j].Consumer })
	return out, nil
}

// --- dead letters

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

// deadAction replays or purges. A bulk action needs a filter (or all=1)
// and max_id, the highest id the operator was shown in the count, so rows
// that died since are not swept up unseen.
func (c *Console) deadAction(ctx context.Context, a action, q deadQuery) (actionView, error) {
	f := store.DeadOnly(q.Filter)
	f.AfterID, f.BeforeID, f.Limit, f.Desc = 0, 0, 0, false
	single := len(f.EventIDs) > 0
	if !single {
		if q.empty() && !q.All {
			return actionView{}, &badRequest{"filter", "give event_id, aggregate_type, aggregate_id, event_type, since/until, error, or all=1"}
		}
		if q.MaxID == 0 {
			return actionView{}, &badRequest{"max_id", "required for a bulk " + string(a) + ": count first (GET /api/dead/count) and pass its max_id"}
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
	c.log.Info("console: dead letters "+string(a)+"ed", "rows", n, "event_ids", len(f.EventIDs), "max_id", q.MaxID)
	return actionView{Action: string(a), Rows: n}, nil
}

// --- inbox

type inboxView struct {
	EventID          string            `json:"event_id"`
	Consumer         string            `json:"consumer"`
	EventType        string            `json:"event_type"`
	Status           string            `json:"status"`
	RetryCount       int               `json:"retry_count"`
	ReceivedAt       time.Time         `json:"received_at"`
	ProcessedAt      *time.Time        `json:"processed_at,omitempty"`
	Error            string            `json:"error_message,omitempty"`
	AggregateType    string            `json:"aggregate_type,omitempty"`
	AggregateID      string            `json:"aggregate_id,omitempty"`
	AggregateVersion int64             `json:"aggregate_version,omitempty"`
	OccurredAt       *time.Time        `json:"occurred_at,omitempty"`
	Headers          map[string]string `json:"headers,omitempty"`
	Payload          jsonBytes         `json:"payload,omitempty"`
}

func inboxRowView(r store.InboxRow, full bool) inboxView {
	v := inboxView{EventID: r.EventID, Consumer: r.ConsumerName, EventType: r.EventType, Status: string(r.Status),
		RetryCount: r.RetryCount, ReceivedAt: r.ReceivedAt, ProcessedAt: r.ProcessedAt, Error: redact(r.ErrorMessage),
		AggregateType: r.Event.AggregateType, AggregateID: r.Event.AggregateID, AggregateVersion: r.Event.AggregateVersion}
	if !r.Event.OccurredAt.IsZero() {
		t := r.Event.OccurredAt
		v.OccurredAt = &t
	}
	if full {
		v.Headers, v.Payload = r.Event.Headers, jsonBytes(r.Event.Payload)
	}
	return v
}

type inboxPageView struct {
	Consumers []consumerView `json:"consumers"`
	Rows      []inboxView    `json:"rows"`
}

var errNoInbox = errors.New("this store has no inbox support")

func (c *Console) inboxPage(ctx context.Context, q inboxQuery) (inboxPageView, error) {
	if c.inbox == nil {
		return inboxPageView{}, errNoInbox
	}
	cons, err := c.consumers(ctx)
	if err != nil {
		return inboxPageView{}, err
	}
	rows, err := c.inbox.InboxList(ctx, q.Filter)
	if err != nil {
		return inboxPageView{}, err
	}
	v := inboxPageView{Consumers: cons, Rows: make([]inboxView, len(rows))}
	for i, r := range rows {
		v.Rows[i] = inboxRowView(r, false)
	}
	return v, nil
}

func (c *Console) inboxEvent(ctx context.Context, consumer, eventID string) (inboxView, error) {
	if c.inbox == nil {
		return inboxView{}, errNoInbox
	}
	if consumer == "" || eventID == "" {
		return inboxView{}, &badRequest{"consumer, id", "both are required"}
	}
	rows, err := c.inbox.InboxList(ctx, store.InboxFilter{Consumer: consumer, EventIDs: []string{eventID}, Limit: 1})
	if err != nil {
		return inboxView{}, err
	}
	if len(rows) == 0 {
		return inboxView{}, fmt.Errorf("inbox event %q of consumer %q: %w", controlPictures(eventID), controlPictures(consumer), txbox.ErrNotFound)
	}
	return inboxRowView(rows[0], true), nil
}

// inboxReplay asks the running consumer to apply parked events again: one
// (event_id) or every parked event of the consumer (all=1).
func (c *Console) inboxReplay(ctx context.Context, q inboxQuery) (actionView, error) {
	if c.inbox == nil {
		return actionView{}, errNoInbox
	}
	f := q.Filter
	f.Status, f.Limit = txbox.StatusDead, 0
	if f.Consumer == "" {
		return actionView{}, &badRequest{"consumer", "required: replays run in that consumer"}
	}
	if len(f.EventIDs) == 0 && !q.All {
		return actionView{}, &badRequest{"event_id", "give event_id, or all=1 for every parked event of the consumer"}
	}
	n, err := c.inbox.InboxReplay(ctx, f)
	if err != nil {
		return actionView{}, err
	}
	c.log.Info("console: inbox replay requested", "consumer", f.Consumer, "rows", n)
	return actionView{Action: "replay", Rows: n}, nil
}

// --- find

type findView struct {
	EventID string       `json:"event_id"`
	Outbox  []recordView `json:"outbox"`
	Inbox   []inboxView  `json:"inbox"`
}

func (c *Console) find(ctx context.Context, eventID string) (findView, error) {
	v := findView{EventID: eventID, Outbox: []recordView{}, Inbox: []inboxView{}}
	if eventID == "" {
		return v, &badRequest{"id", "missing event id"}
	}
	recs, err := c.s.List(ctx, store.Filter{EventIDs: []string{eventID}, Limit: 20})
	if err != nil {
		return v, err
	}
	for _, r := range recs {
		v.Outbox = append(v.Outbox, view(r, false))
	}
	if c.inbox != nil {
		rows, err := c.inbox.InboxList(ctx, store.InboxFilter{EventIDs: []string{eventID}, Limit: 100})
		if err != nil {
			return v, err
		}
		for _, r := range rows {
			v.Inbox = append(v.Inbox, inboxRowView(r, false))
		}
	}
	return v, nil
}
