package console

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/store"
)

// Parked inbox events.

type inboxView struct {
	EventID  string `json:"event_id"`
	Consumer string `json:"consumer"`
	adminview.InboxState
	AggregateType    string            `json:"aggregate_type,omitempty"`
	AggregateID      string            `json:"aggregate_id,omitempty"`
	AggregateVersion int64             `json:"aggregate_version,omitempty"`
	OccurredAt       *time.Time        `json:"occurred_at,omitempty"`
	Headers          map[string]string `json:"headers,omitempty"`
	Payload          jsonBytes         `json:"payload,omitempty"`
}

func inboxRowView(r store.InboxRow, full bool) inboxView {
	v := inboxView{EventID: r.EventID, Consumer: r.ConsumerName, InboxState: adminview.InboxStateOf(r),
		AggregateType: r.Event.AggregateType, AggregateID: r.Event.AggregateID, AggregateVersion: r.Event.AggregateVersion}
	v.Error = redact(v.Error)
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
// (event_id) or every parked event of the consumer (all=1). It is logged
// with the event ids and the client's address.
func (c *Console) inboxReplay(ctx context.Context, q inboxQuery, client string) (actionView, error) {
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
	attrs := []any{"consumer", f.Consumer, "rows", n, "client", client}
	if len(f.EventIDs) > 0 {
		attrs = append(attrs, "event_ids", strings.Join(f.EventIDs, ","))
	} else {
		attrs = append(attrs, "all", true)
	}
	c.log.Info("console: inbox replay requested", attrs...)
	return actionView{Action: "replay", Rows: n}, nil
}
