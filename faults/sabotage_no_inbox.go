//go:build txbox_sabotage_no_inbox

package faults

import (
	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/sabotage"
	"github.com/txbox/txbox/store"
)

// A deliberately broken build: the inbox records nothing, so a redelivered
// event is applied again. The version guard would drop the redelivery as
// stale, so it goes too, and Ordered with it (it needs the guard). Never
// build releases with this tag.
func init() {
	consumerInbox = func(s store.InboxStore[pgx.Tx], c inbox.Config) (store.InboxStore[pgx.Tx], inbox.Config) {
		c.VersionGuard, c.Ordered = false, false
		return sabotage.NoInbox(s), c
	}
}
