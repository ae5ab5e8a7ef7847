package mysql

import (
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlgolden"
)

// TestSQLGolden prints every statement of the MySQL store, for the default
// and custom table names and with DeleteSent, into testdata/sql_*.golden,
// so a change to the SQL shows in the diff: those rendered once (queries,
// inboxQueries) and those rendered per call, with sqlgolden's filters and
// with two heads or ids. -update rewrites them.
func TestSQLGolden(t *testing.T) {
	sqlgolden.Run(t, sqlgolden.Cases("app"), func(c sqlgolden.Case) ([]sqlgolden.Statement, error) {
		s, err := New(nil, Options{Tables: c.Tables, DeleteSent: c.DeleteSent})
		if err != nil {
			return nil, err
		}
		q := s.q
		runs, _ := q.runQuery([]head{{id: 1, aggType: "a", aggID: "1"}, {id: 2, aggType: "a", aggID: "2"}}, maxRun)
		ids, _ := inList([]int64{1, 2}, nil)
		where, _ := filter(sqlgolden.Filter)
		stmts := append(sqlgolden.Fields(q, "table", "sent"), sqlgolden.Fields(newInboxQueries(s.inboxTable()))...)
		stmts = append(stmts, sqlgolden.Inbox(s.inboxTable(), sqlstore.QuestionMark)...)
		stmts = append(stmts, sqlgolden.Statement{Name: "runQuery (two heads)", SQL: runs})
		for _, st := range idStatements(q) {
			stmts = append(stmts, sqlgolden.Statement{Name: st.file + " (two ids)", SQL: st.sql.With(ids)})
		}
		return append(stmts, []sqlgolden.Statement{
			{Name: "list (filtered, both tables)", SQL: q.list(where, "id", sqlgolden.Filter.Limit, "", true, true)},
			{Name: "list (filtered, hot table with the hint)", SQL: q.list(where, "id DESC", sqlgolden.Filter.Limit, statusIndexHint(store.Filter{Status: txbox.StatusDead}), true, false)},
			{Name: "count (filtered, both tables)", SQL: q.filtered("count.sql", where, true, true)},
			{Name: "count (filtered, archive)", SQL: q.filtered("count.sql", where, false, true)},
			{Name: "replay (filtered)", SQL: q.filtered("replay.sql", where, true, false)},
			{Name: "purge (filtered)", SQL: q.filtered("purge.sql", where, true, false)},
		}...), nil
	})
}
