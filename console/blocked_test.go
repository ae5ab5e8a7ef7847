package console_test

import (
	"strings"
	"testing"

	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
)

// The overview shows the aggregates held behind DEAD events (relay
// --dead-blocks): a card, and a list of them with the DEAD event of each,
// linked to its page and to the aggregate's dead letters; "blocked" in
// /api/overview.
func TestOverviewShowsBlockedAggregates(t *testing.T) {
	eachStore(t, func(t *testing.T, h harness, s store.Store) {
		c := newConsole(t, s, console.Options{})
		poison, next := ev("acct", 1), ev("acct", 2)
		write(t, h, s, poison, next)
		storeenv.Block(t, s, poison, next)
		var ov struct {
			Blocked *struct {
				Aggregates int64 `json:"aggregates"`
				Rows       int64 `json:"rows"`
				List       []struct {
					AggregateType string `json:"aggregate_type"`
					AggregateID   string `json:"aggregate_id"`
					DeadEventID   string `json:"dead_event_id"`
				} `json:"list"`
			} `json:"blocked"`
		}
		getJSON(t, c, "/api/overview", &ov)
		must(t, ov.Blocked != nil && ov.Blocked.Aggregates == 1 && ov.Blocked.Rows == 1, "overview's blocked: %+v", ov.Blocked)
		must(t, len(ov.Blocked.List) == 1 && ov.Blocked.List[0].AggregateID == "acct" && ov.Blocked.List[0].DeadEventID == poison.ID, "blocked list: %+v", ov.Blocked.List)
		page := get(t, c, "/")
		must(t, strings.Contains(page, `id="blocked">1</span>`), "overview page lacks the blocked card:\n%s", page)
		must(t, strings.Contains(page, `id="blocked-list"`) && strings.Contains(page, "/dead/event?id="+poison.ID) &&
			strings.Contains(page, "/dead?aggregate_id=acct&amp;aggregate_type=Order"), "overview page lacks the blocked aggregate's links:\n%s", page)
		must(t, strings.Contains(get(t, c, "/dead/event?id="+poison.ID), poison.ID), "the DEAD event's page")
	})
}
