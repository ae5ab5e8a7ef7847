package sqlite

import (
	"embed"
	"strconv"
	"text/template"

	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// Every statement of this store lives in queries/*.sql, one file per
// statement, and head.sql, the part the probe and the claim share. The
// files are templates (store/internal/sqltemplate): the fields of sqlArgs
// fill in the table names, the parameter holding the time and a filter's
// WHERE clause ({{.Table}}, {{.Now}}, {{.Where}}), and the functions the
// fragments that take a row alias ({{unsent "e"}}). TestSQLGolden prints
// every rendered statement into testdata/sql_*.golden.

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", template.FuncMap{
	"unsent":      unsent,
	"deliverable": sqltemplate.Deliverable,
	"cols":        func() string { return cols },
	"nowMicros":   func() string { return nowMicros },
})

// queries holds this dialect's SQL, rendered once per table name; the
// statements that take a filter are rendered per call (list, filtered).
type queries struct {
	args       sqlArgs // the table names, for the statements rendered per call
	table      string
	deleteSent bool
	// The relay's.
	probe      string
	claim      string
	markSent   string
	markFailed string
	release    string
	// The operator's, the metrics' and the migrations'.
	stats             string
	statsOldest       string
	backlog           string
	cleanup           string
	countCleanup      string
	inboxCleanup      string
	countInboxCleanup string
	migrationsTable   string
	migrationApplied  string
	migrationRecord   string
	// Blocking dead letters' (deadblock.go).
	ahead       string
	releaseHeld string
	blocked     string
}

// sqlArgs are the named fragments of the statement templates.
type sqlArgs struct {
	Table      string
	Inbox      string
	Now        string // the parameter holding the time, unix µs
	DeleteSent bool   // delete delivered rows instead of marking them SENT
	// A filter's WHERE clause (without the keyword), and List's order and
	// limit.
	Where, Order, Limit string
}

// unsentTerm is written exactly as in the partial indexes' WHERE clause:
// SQLite uses a partial index only when the query repeats its terms.
const unsentTerm = `status IN ('PENDING', 'RETRY', 'PROCESSING')`

// unsent is unsentTerm for the row alias, if one is given.
func unsent(alias ...string) string {
	if len(alias) == 0 {
		return unsentTerm
	}
	return alias[0] + "." + unsentTerm
}

func newQueries(table, inbox string, deleteSent bool) queries {
	a := sqlArgs{Table: table, Inbox: inbox, DeleteSent: deleteSent}
	probe := a
	probe.Now = "?1"
	claim := a
	claim.Now = "?4"
	r := queryTemplates.Render
	return queries{
		args:              a,
		table:             table,
		deleteSent:        deleteSent,
		probe:             r("probe.sql", probe),
		claim:             r("claim.sql", claim),
		markSent:          r("mark_sent.sql", a),
		markFailed:        r("mark_failed.sql", a),
		release:           r("release.sql", a),
		stats:             r("stats.sql", a),
		statsOldest:       r("stats_oldest.sql", a),
		backlog:           r("backlog.sql", a),
		cleanup:           r("cleanup.sql", a),
		countCleanup:      r("count_cleanup.sql", a),
		inboxCleanup:      r("inbox_cleanup.sql", a),
		countInboxCleanup: r("count_inbox_cleanup.sql", a),
		migrationsTable:   r("migrations_table.sql", a),
		migrationApplied:  r("migration_applied.sql", a),
		migrationRecord:   r("migration_record.sql", a),
		ahead:             r("ahead.sql", a),
		releaseHeld:       r("release_held.sql", a),
		blocked:           r("blocked.sql", a),
	}
}

// list is List's SELECT of the rows where selects, in order, at most limit.
func (q queries) list(where, order string, limit int) string {
	a := q.args
	a.Where, a.Order, a.Limit = where, order, strconv.Itoa(limit)
	return queryTemplates.Render("list.sql", a)
}

// filtered is the statement of file (count, replay, purge) for the rows
// where selects.
func (q queries) filtered(file, where string) string {
	a := q.args
	a.Where = where
	return queryTemplates.Render(file, a)
}

// inboxQueries are the Dialect's inbox statements for one inbox table.
type inboxQueries struct {
	inboxInsert  string
	inboxLookup  string
	inboxRetry   string
	inboxDone    string
	inboxFail    string
	versionRaise string
	versionRead  string
}

func newInboxQueries(inbox string) inboxQueries {
	a := sqlArgs{Inbox: inbox}
	r := queryTemplates.Render
	return inboxQueries{
		inboxInsert:  r("inbox_insert.sql", a),
		inboxLookup:  r("inbox_lookup.sql", a),
		inboxRetry:   r("inbox_retry.sql", a),
		inboxDone:    r("inbox_done.sql", a),
		inboxFail:    r("inbox_fail.sql", a),
		versionRaise: r("version_raise.sql", a),
		versionRead:  r("version_read.sql", a),
	}
}
