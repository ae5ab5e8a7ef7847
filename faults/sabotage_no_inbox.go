//go:build txbox_sabotage_no_inbox

package faults

import (
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/internal/sabotage"
	"github.com/txbox/txbox/store"
)

// A deliberately broken build: the inbox records nothing, so a redelivered
// event is applied again. Never build releases with this tag.
func init() {
	skipInboxRecord = func(st any) any {
		switch s := st.(type) {
		case store.InboxStore[pgx.Tx]:
			return sabotage.NoInbox(s)
		case store.InboxStore[*sql.Tx]:
			return sabotage.NoInbox(s)
		}
		panic(fmt.Sprintf("no-inbox sabotage: %T", st))
	}
}
