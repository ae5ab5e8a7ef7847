package sqlite

import (
	"fmt"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlgolden"
)

// TestSQLGolden prints the SQLite store's probe, claim and marks, with and
// without DeleteSent and for custom table names, into testdata/sql_*.golden;
// -update rewrites them.
func TestSQLGolden(t *testing.T) {
	sqlgolden.Run(t, map[string]Options{
		"sql_default":       {},
		"sql_delete_sent":   {DeleteSent: true},
		"sql_custom_tables": {Tables: store.Tables{Outbox: "orders_out", Inbox: "orders_in"}},
	}, func(o Options) ([]sqlgolden.Statement, error) {
		s, err := New(nil, o)
		if err != nil {
			return nil, err
		}
		q := s.q
		return []sqlgolden.Statement{
			{Name: "probe", SQL: q.probe},
			{Name: "claim", SQL: q.claim},
			{Name: "markSent", SQL: q.markSent},
			{Name: "markFailed", SQL: q.markFailed},
			{Name: "release", SQL: q.release},
			{Name: "backlog", SQL: fmt.Sprintf(backlogQuery, q.table)},
		}, nil
	})
}
