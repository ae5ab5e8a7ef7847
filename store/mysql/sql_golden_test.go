package mysql

import (
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlgolden"
)

// TestSQLGolden prints the MySQL store's claim statements for the default
// and custom table names into testdata/sql_*.golden, so a change to the SQL
// shows in the diff; -update rewrites them.
func TestSQLGolden(t *testing.T) {
	sqlgolden.Run(t, map[string]Options{
		"sql_default":       {},
		"sql_custom_tables": {Tables: store.Tables{Schema: "app", Outbox: "orders_out", Inbox: "orders_in"}},
	}, func(o Options) ([]sqlgolden.Statement, error) {
		s, err := New(nil, o)
		if err != nil {
			return nil, err
		}
		q := s.q
		runs, _ := q.runQuery([]head{{id: 1, aggType: "a", aggID: "1"}, {id: 2, aggType: "a", aggID: "2"}}, maxRun)
		return []sqlgolden.Statement{
			{Name: "heads", SQL: q.heads},
			{Name: "between", SQL: q.between},
			{Name: "runQuery (two heads)", SQL: runs},
			{Name: "lock (the claim appends the id list)", SQL: q.lock},
		}, nil
	})
}
