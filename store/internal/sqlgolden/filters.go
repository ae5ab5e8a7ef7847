package sqlgolden

import (
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Filter is the filter the golden files print a store's filtered
// statements (List, Count, Replay, Purge) with: one of every condition, so
// the file shows the whole WHERE clause a filter can make.
var Filter = store.Filter{
	Status: txbox.StatusDead, EventIDs: []string{"e1", "e2"}, AggregateType: "Order", AggregateID: "a",
	EventType: "OrderPlaced", Since: time.Unix(0, 0), Until: time.Unix(1, 0), ErrorContains: "boom",
	AfterID: 10, BeforeID: 20, Limit: 50,
}

// InboxFilter is Filter for the inbox admin statements (InboxList,
// InboxReplay).
var InboxFilter = store.InboxFilter{
	Consumer: "billing", Status: txbox.StatusDead, EventIDs: []string{"e1", "e2"},
	Since: time.Unix(0, 0), Until: time.Unix(1, 0), Limit: 50,
}
