package mysql

import (
	"embed"
	"fmt"
	"text/template"

	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// The claim's statements live in queries/*.sql, one file per statement. The
// files are templates (store/internal/sqltemplate): {{.Table}} is the
// outbox's qualified name, and {{deliverable "e"}} the deliverable predicate
// for the row alias e. TestSQLGolden prints every rendered statement into
// testdata/sql_*.golden.

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", template.FuncMap{
	"deliverable": func(alias string) string { return fmt.Sprintf(deliverable, alias) },
	"cols":        func(alias string) string { return prefixed(alias, recordCols) },
})

// queries holds this dialect's claim SQL, rendered once per table name.
type queries struct {
	table   string // hot table: unsent and DEAD rows
	sent    string // archive of delivered rows
	heads   string
	between string
	run     string // one head's run; runQuery joins one per head
	lock    string // prefix; the id list is appended per claim
}

// deliverable is true for a row a claimer may take now. It is NULL for a
// RETRY or PROCESSING row without next_retry_at or locked_until (written
// by hand), which a claim must read as false.
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= UTC_TIMESTAMP(6))
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= UTC_TIMESTAMP(6)))`

func newQueries(table, sent string) queries {
	args := struct{ Table string }{table}
	r := queryTemplates.Render
	return queries{
		table:   table,
		sent:    sent,
		heads:   r("heads.sql", args),
		between: r("between.sql", args),
		run:     r("run.sql", args),
		lock:    r("lock.sql", args),
	}
}
