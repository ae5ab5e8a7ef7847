package console_test

import (
	"strings"
	"testing"

	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
)

// The overview shows the aggregates held behind DEAD events (relay
// --dead-blocks): a card on the page, "blocked" in /api/overview.
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
			} `json:"blocked"`
		}
		getJSON(t, c, "/api/overview", &ov)
		must(t, ov.Blocked != nil && ov.Blocked.Aggregates == 1 && ov.Blocked.Rows == 1, "overview's blocked: %+v", ov.Blocked)
		page := get(t, c, "/")
		must(t, strings.Contains(page, `id="blocked">1</span>`), "overview page lacks the blocked card:\n%s", page)
	})
}
