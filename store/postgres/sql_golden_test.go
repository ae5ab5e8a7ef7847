package postgres

import (
	"fmt"
	"testing"

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
			{Name: "txClaim", SQL: q.txClaim},
			{Name: "txChain", SQL: q.txChain},
			{Name: "txHeads", SQL: q.txHeads},
			{Name: "floorProbe", SQL: q.floorProbe},
			{Name: "floorProbe (sequence filled in)", SQL: fmt.Sprintf(q.floorProbe, q.table+"_id_seq")},
			{Name: "floorBelow", SQL: q.floorBelow},
			{Name: "markSent", SQL: q.markSent},
			{Name: "markFailed", SQL: q.markFailed},
			{Name: "release", SQL: q.release},
			{Name: "txSent", SQL: q.txSent},
			{Name: "txFailed", SQL: q.txFailed},
			{Name: "backlog", SQL: fmt.Sprintf(backlogQuery, q.table)},
			{Name: "countMembers", SQL: countMembersSQL},
			{Name: "planClaim", SQL: planClaim},
			{Name: "floorMark", SQL: floorMark},
		}, nil
	})
}
