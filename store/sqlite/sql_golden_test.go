package sqlite

import (
	"testing"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store/internal/sqlgolden"
)

// TestSQLGolden prints every statement of the SQLite store, with and
// without DeleteSent and for custom table names, into testdata/sql_*.golden:
// those rendered once (queries, inboxQueries) and, with sqlgolden's
// filters, those rendered per call. -update rewrites them.
func TestSQLGolden(t *testing.T) {
	sqlgolden.Run(t, sqlgolden.Cases(""), func(c sqlgolden.Case) ([]sqlgolden.Statement, error) {
		s, err := New(nil, Options{Tables: c.Tables, DeleteSent: c.DeleteSent})
		if err != nil {
			return nil, err
		}
		q := s.q
		where, _ := filter(sqlgolden.Filter)
		stmts := append(sqlgolden.Fields(q, "table"), sqlgolden.Fields(newInboxQueries(s.inboxTable()))...)
		stmts = append(stmts, sqlgolden.Inbox(s.inboxTable(), sqlstore.QuestionMark)...)
		return append(stmts, []sqlgolden.Statement{
			{Name: "list (filtered)", SQL: q.list(where, "id", sqlgolden.Filter.Limit)},
			{Name: "count (filtered)", SQL: q.filtered("count.sql", where)},
			{Name: "replay (filtered)", SQL: q.filtered("replay.sql", where)},
			{Name: "purge (filtered)", SQL: q.filtered("purge.sql", where)},
			{Name: "beginImmediate", SQL: beginImmediateSQL},
			{Name: "commit", SQL: commitSQL},
			{Name: "rollback", SQL: rollbackSQL},
		}...), nil
	})
}
