package sqlite

import (
	"embed"
	"fmt"
	"text/template"

	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// The relay's statements live in queries/*.sql, one file per statement, and
// head.sql, the part the probe and the claim share. The files are templates
// (store/internal/sqltemplate): the fields of sqlArgs fill in the table name
// and the parameter holding the time ({{.Table}}, {{.Now}}), and the
// functions the fragments that take a row alias ({{unsent "e"}}).
// TestSQLGolden prints every rendered statement into testdata/sql_*.golden.

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", template.FuncMap{
	"unsent":      func(alias string) string { return alias + "." + unsentTerm },
	"deliverable": func(alias, now string) string { return fmt.Sprintf(deliverable, alias, now) },
	"cols":        func() string { return cols },
})

// queries holds this dialect's relay SQL, rendered once per table name.
type queries struct {
	table      string
	probe      string
	claim      string
	markSent   string
	markFailed string
	release    string
	deleteSent bool
}

// sqlArgs are the named fragments of the statement templates.
type sqlArgs struct {
	Table      string
	Now        string // the parameter holding the time, unix µs
	DeleteSent bool   // delete delivered rows instead of marking them SENT
}

// unsentTerm is written exactly as in the partial indexes' WHERE clause:
// SQLite uses a partial index only when the query repeats its terms.
const unsentTerm = `status IN ('PENDING', 'RETRY', 'PROCESSING')`

// deliverable is true for a row a claimer may take at time %[2]s (unix µs).
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= %[2]s)
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= %[2]s))`

func newQueries(table string, deleteSent bool) queries {
	a := sqlArgs{Table: table, DeleteSent: deleteSent}
	probe := a
	probe.Now = "?1"
	claim := a
	claim.Now = "?4"
	r := queryTemplates.Render
	return queries{
		table:      table,
		deleteSent: deleteSent,
		probe:      r("probe.sql", probe),
		claim:      r("claim.sql", claim),
		markSent:   r("mark_sent.sql", a),
		markFailed: r("mark_failed.sql", a),
		release:    r("release.sql", a),
	}
}
