package sqlinbox

import (
	"embed"
	"strconv"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// The shared admin statements live in queries/*.sql, one file per
// statement, rendered by store/internal/sqltemplate: {{.Table}} is the
// inbox table as the store names it, {{.Cols}} the columns ScanList reads,
// {{.Where}} a filter's WHERE clause (sqlstore.InboxFilterSQL), {{.Param}}
// the placeholder of a statement's own first argument. Each store's
// TestSQLGolden prints them (sqlgolden.Inbox).

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", nil)

// sqlArgs are the named fragments of the statement templates.
type sqlArgs struct {
	Table string
	Cols  string // Cols
	Where string
	Limit string
	Param string
}

// ListQuery is the SELECT of InboxList over table, where (the dialect's
// filter) and f's limit.
func ListQuery(table, where string, f store.InboxFilter) string {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return queryTemplates.Render("list.sql", sqlArgs{Table: table, Cols: Cols, Where: where, Limit: strconv.Itoa(limit)})
}

// CountsQuery is the SELECT of InboxCounts.
func CountsQuery(table string) string {
	return queryTemplates.Render("counts.sql", sqlArgs{Table: table})
}

// Replay is the UPDATE of InboxReplay: the rows where selects (its
// placeholders numbered from the second, ph renders them) become REPLAY
// with a fresh attempt budget, never a parked undecodable message. The
// caller makes where select DEAD rows only.
func Replay(table, where string, ph func(n int) string, args []any) (string, []any) {
	return queryTemplates.Render("replay.sql", sqlArgs{Table: table, Where: where, Param: ph(1)}),
		append([]any{store.UndecodableType}, args...)
}
