package console

import (
	"context"

	"github.com/txbox/txbox/store"
)

// Where an event is.

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
