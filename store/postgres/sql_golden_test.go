package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/sqlstore"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlgolden"
)

// TestSQLGolden prints the PostgreSQL store's statements (the claims of
// both kinds, the floor's, the marks) for the default tables, DeleteSent and
// a custom schema into testdata/sql_*.golden; -update rewrites them.
func TestSQLGolden(t *testing.T) {
	sqlgolden.Run(t, map[string]Options{
		"sql_default":       {},
		"sql_delete_sent":   {DeleteSent: true},
		"sql_custom_tables": {Tables: store.Tables{Schema: "app", Outbox: "orders_out", Inbox: "orders_in"}},
	}, func(o Options) ([]sqlgolden.Statement, error) {
		s, err := New(nil, o)
		if err != nil {
			return nil, err
		}
		q := s.q
		return []sqlgolden.Statement{
			{Name: "claimScan", SQL: q.claimScan},
			{Name: "claim", SQL: q.claim},
			{Name: "windowFull", SQL: q.windowFull},
			{Name: "txClaim", SQL: q.txClaim.shared},
			{Name: "txClaim (alone)", SQL: q.txClaim.alone},
			{Name: "txChain", SQL: q.txChain.shared},
			{Name: "txChain (alone)", SQL: q.txChain.alone},
			{Name: "txHeads", SQL: q.txHeads},
			{Name: "floorProbe", SQL: q.floorProbe},
			{Name: "floorProbe (sequence filled in)", SQL: fmt.Sprintf(q.floorProbe, q.table+"_id_seq")},
			{Name: "floorBelow", SQL: q.floorBelow},
			{Name: "markSent", SQL: q.markSent},
			{Name: "markFailed", SQL: q.markFailed},
			{Name: "release", SQL: q.release},
			{Name: "txSent", SQL: q.txSent},
			{Name: "txFailed", SQL: q.txFailed},
			{Name: "backlog", SQL: s.st.backlog},
			{Name: "relock", SQL: q.relock},
			{Name: "countMembers", SQL: countMembersSQL},
			{Name: "memberLock", SQL: memberLockSQL},
			{Name: "unlockAll", SQL: unlockAllSQL},
			{Name: "sequence", SQL: sequenceSQL},
			{Name: "planClaim", SQL: planClaim},
			{Name: "floorMark", SQL: floorMark},
		}, nil
	})
}

// TestSQLGoldenStatements prints the rest of the store's statements into
// testdata/statements_*.golden: the operator's, CDC's, the migrations' and
// the inbox's, rendered once (statements, inboxQueries, dialectSQL) or,
// with sqlgolden's filters and two events, per call.
func TestSQLGoldenStatements(t *testing.T) {
	cases := map[string]sqlgolden.Case{}
	for name, c := range sqlgolden.Cases("app") {
		if !c.DeleteSent {
			cases[strings.Replace(name, "sql_", "statements_", 1)] = c
		}
	}
	sqlgolden.Run(t, cases, func(c sqlgolden.Case) ([]sqlgolden.Statement, error) {
		s, err := New(nil, Options{Tables: c.Tables})
		if err != nil {
			return nil, err
		}
		st, in := s.st, Dialect{Tables: s.tables}.inbox()
		where, args := sqlstore.FilterSQL(sqlgolden.Filter, ph, 1)
		rows := fmt.Sprintf(processedRow, 2, 3, 4, 5, 6, 7) + ", " + fmt.Sprintf(processedRow, 8, 9, 10, 11, 12, 13)
		stmts := append(sqlgolden.Fields(st), sqlgolden.Fields(in)...)
		stmts = append(stmts, sqlgolden.Fields(dialectSQL)...)
		stmts = append(stmts, sqlgolden.Inbox(st.args.Inbox, ph)...)
		return append(stmts, []sqlgolden.Statement{
			{Name: "list (filtered, both tables)", SQL: st.list(where, "id", sqlgolden.Filter.Limit, true)},
			{Name: "list (filtered, outbox table)", SQL: st.list(where, "id DESC", sqlgolden.Filter.Limit, false)},
			{Name: "count (filtered, both tables)", SQL: st.filtered("count.sql", where, true, "")},
			{Name: "count (filtered, outbox table)", SQL: st.filtered("count.sql", where, false, "")},
			{Name: "replay (filtered)", SQL: st.filtered("replay.sql", where, false, ph(len(args)+1))},
			{Name: "purge (filtered)", SQL: st.filtered("purge.sql", where, false, "")},
			{Name: "inboxInsertBatch (two events)", SQL: in.inboxInsertBatch.With(rows)},
			{Name: "inboxForget (two events)", SQL: in.inboxForget.With("$2, $3")},
			{Name: "listen", SQL: listenSQL(`"outbox_event_wakeup"`)},
		}...), nil
	})
}
