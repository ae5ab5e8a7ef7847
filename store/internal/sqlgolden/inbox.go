package sqlgolden

import (
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

// Inbox lists the inbox admin statements a store takes from sqlinbox, for
// its inbox table and placeholders ph, filtered by InboxFilter.
func Inbox(table string, ph func(n int) string) []Statement {
	where, _ := sqlstore.InboxFilterSQL(InboxFilter, ph, 1)
	replayWhere, _ := sqlstore.InboxFilterSQL(InboxFilter, ph, 2)
	replay, _ := sqlinbox.Replay(table, replayWhere, ph, nil)
	return []Statement{
		{Name: "inboxList (filtered)", SQL: sqlinbox.ListQuery(table, where, InboxFilter)},
		{Name: "inboxCounts", SQL: sqlinbox.CountsQuery(table)},
		{Name: "inboxReplay (filtered)", SQL: replay},
	}
}
