package console

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/store"
)

// The overview: counts, relays seen, consumers.

type overviewView struct {
	adminview.Outbox
	Relays    []relaySeen    `json:"relays"`
	Consumers []consumerView `json:"inbox_consumers"`
	Samples   []sample       `json:"samples"`
	// Blocked: the rows held behind DEAD events (relay --dead-blocks);
	// absent for a store that cannot hold rows.
	Blocked *blockedView `json:"blocked,omitempty"`
}

type blockedView struct {
	Aggregates           int64   `json:"aggregates"`
	Rows                 int64   `json:"rows"`
	OldestHeldAgeSeconds float64 `json:"oldest_held_age_seconds"`
	// List: the first blockedList blocked aggregates, each with the DEAD
	// event that holds it back.
	List []blockedAggregate `json:"list"`
}

type blockedAggregate struct {
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	DeadEventID   string `json:"dead_event_id"`
}

// blockedList bounds the held rows the overview reads to list blocked
// aggregates.
const blockedList = 200

// blockedAggregates lists the aggregates of the held rows (store.HeldFilter),
// oldest first, once each.
func (c *Console) blockedAggregates(ctx context.Context) ([]blockedAggregate, error) {
	rows, err := c.s.List(ctx, store.HeldFilter(blockedList))
	if err != nil {
		return nil, err
	}
	var out []blockedAggregate
	seen := map[[2]string]bool{}
	for _, r := range rows {
		id, ok := store.HeldBehind(r.LastError)
		k := [2]string{r.AggregateType, r.AggregateID}
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, blockedAggregate{AggregateType: r.AggregateType, AggregateID: r.AggregateID, DeadEventID: id})
	}
	return out, nil
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

func (c *Console) overview(ctx context.Context) (overviewView, error) {
	st, err := c.freshSample(ctx)
	if err != nil {
		return overviewView{}, err
	}
	v := overviewView{Outbox: adminview.OutboxOf(st)}
	if v.Relays, err = c.relays(ctx); err != nil {
		return v, err
	}
	if v.Consumers, err = c.consumers(ctx); err != nil {
		return v, err
	}
	v.Samples = c.sampleList()
	if db, ok := c.s.(store.DeadBlocker); ok {
		b, err := db.Blocked(ctx)
		if err != nil {
			return v, err
		}
		v.Blocked = &blockedView{Aggregates: b.Aggregates, Rows: b.Rows, OldestHeldAgeSeconds: b.OldestAge.Seconds()}
		if b.Aggregates > 0 {
			if v.Blocked.List, err = c.blockedAggregates(ctx); err != nil {
				return v, err
			}
		}
	}
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
