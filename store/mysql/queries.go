package mysql

import (
	"embed"
	"strconv"
	"text/template"

	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// Every statement of this store lives in queries/*.sql, one file per
// statement. The files are templates (store/internal/sqltemplate): the
// fields of sqlArgs fill in the table names and the parts that vary per
// call ({{.Table}}, {{.IDs}}, {{.Where}}), {{deliverable "e"}} the
// deliverable predicate for the row alias e, and {{cols}} the columns of
// both tables. TestSQLGolden prints every rendered statement into
// testdata/sql_*.golden.

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", template.FuncMap{
	"deliverable": func(alias string) string { return sqltemplate.Deliverable(alias, "UTC_TIMESTAMP(6)") },
	"cols":        cols,
})

// cols is recordCols, each prefixed with the row alias if one is given.
func cols(alias ...string) string {
	if len(alias) == 0 {
		return recordCols
	}
	return prefixed(alias[0], recordCols)
}

// sqlArgs are the named fragments of the statement templates.
type sqlArgs struct {
	Table  string // hot table: unsent and DEAD rows
	Sent   string // archive of delivered rows
	Inbox  string
	Schema string
	// Per call: the placeholders of an id list ("?, ?", spliced in where
	// newQueries put sqltemplate.Hole), a filter's WHERE clause (without
	// the keyword), List's order, limit and index hint, and which tables
	// List and Count read.
	IDs, Where, Order, Limit, Hint string
	Hot, Archive                   bool
}

// queries holds this dialect's SQL, rendered once per table name; the
// statements that take an id list are spliced per call, those that take a
// filter rendered per call.
type queries struct {
	args    sqlArgs // the table names, for the statements rendered per call
	table   string
	sent    string
	heads   string
	between string
	run     string // one head's run; runQuery joins one per head
	// The relay's statements on an id list, its placeholders (inList)
	// spliced in per call.
	lock, lease, release                                          sqltemplate.Spliced
	markSentDelete, markSentLock, markSentArchive, markSentRemove sqltemplate.Spliced
	// Per row of MarkFailed.
	markDead  string
	markRetry string
	// The operator's, the metrics' and the migrations'.
	stats             string
	statsOldest       string
	backlog           string
	backlogOldest     string
	cleanup           string
	countCleanup      string
	inboxCleanup      string
	countInboxCleanup string
	namedLock         string
	namedUnlock       string
	horizon           string
	createDatabase    string
	migrationsTable   string
	migrationApplied  string
	migrationRecord   string
	indexExists       string
	// Blocking dead letters' (deadblock.go).
	ahead       sqltemplate.Spliced
	heldFree    string
	releaseHeld sqltemplate.Spliced
	blocked     string
}

func newQueries(t sqlArgs) queries {
	r := func(file string) string { return queryTemplates.Render(file, t) }
	ids := t
	ids.IDs = sqltemplate.Hole
	sp := func(file string) sqltemplate.Spliced { return queryTemplates.Splice(file, ids) }
	return queries{
		args:              t,
		table:             t.Table,
		sent:              t.Sent,
		heads:             r("heads.sql"),
		between:           r("between.sql"),
		run:               r("run.sql"),
		lock:              sp("lock.sql"),
		lease:             sp("lease.sql"),
		release:           sp("release.sql"),
		markSentDelete:    sp("mark_sent_delete.sql"),
		markSentLock:      sp("mark_sent_lock.sql"),
		markSentArchive:   sp("mark_sent_archive.sql"),
		markSentRemove:    sp("mark_sent_remove.sql"),
		markDead:          r("mark_dead.sql"),
		markRetry:         r("mark_retry.sql"),
		stats:             r("stats.sql"),
		statsOldest:       r("stats_oldest.sql"),
		backlog:           r("backlog.sql"),
		backlogOldest:     r("backlog_oldest.sql"),
		cleanup:           r("cleanup.sql"),
		countCleanup:      r("count_cleanup.sql"),
		inboxCleanup:      r("inbox_cleanup.sql"),
		countInboxCleanup: r("count_inbox_cleanup.sql"),
		namedLock:         r("named_lock.sql"),
		namedUnlock:       r("named_unlock.sql"),
		horizon:           r("horizon.sql"),
		createDatabase:    r("create_database.sql"),
		migrationsTable:   r("migrations_table.sql"),
		migrationApplied:  r("migration_applied.sql"),
		migrationRecord:   r("migration_record.sql"),
		indexExists:       r("index_exists.sql"),
		ahead:             sp("ahead.sql"),
		heldFree:          r("held_free.sql"),
		releaseHeld:       sp("release_held.sql"),
		blocked:           r("blocked.sql"),
	}
}

// filtered is the statement of file (count, replay, purge) for the rows
// where selects in the tables hot and archive say.
func (q queries) filtered(file, where string, hot, archive bool) string {
	a := q.args
	a.Where, a.Hot, a.Archive = where, hot, archive
	return queryTemplates.Render(file, a)
}

// list is List's statement: filtered, in order, at most limit per table
// and in all, with the hot table's index hint.
func (q queries) list(where, order string, limit int, hint string, hot, archive bool) string {
	a := q.args
	a.Where, a.Order, a.Limit, a.Hint, a.Hot, a.Archive = where, order, strconv.Itoa(limit), hint, hot, archive
	return queryTemplates.Render("list.sql", a)
}

// inboxQueries are the Dialect's inbox statements for one inbox table.
type inboxQueries struct {
	inboxAcquire string
	inboxLookup  string
	inboxDone    string
	inboxFail    string
	versionGuard string
	versionRaise string
	versionRead  string
}

func newInboxQueries(inbox string) inboxQueries {
	a := sqlArgs{Inbox: inbox}
	r := queryTemplates.Render
	return inboxQueries{
		inboxAcquire: r("inbox_acquire.sql", a),
		inboxLookup:  r("inbox_lookup.sql", a),
		inboxDone:    r("inbox_done.sql", a),
		inboxFail:    r("inbox_fail.sql", a),
		versionGuard: r("version_guard.sql", a),
		versionRaise: r("version_raise.sql", a),
		versionRead:  r("version_read.sql", a),
	}
}
