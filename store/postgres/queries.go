package postgres

import (
	"embed"
	"fmt"
	"strconv"
	"text/template"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// The relay's statements live in queries/*.sql: one file per statement, and
// the parts the claims share (window.sql and heads.sql find the candidates,
// lock.sql locks them, lease.sql leases them). The files are templates
// (store/internal/sqltemplate): the fields of sqlArgs fill in the table
// names and the parameters a shared part needs ({{.Table}}, {{.Held}}), and
// queryFuncs the fragments that take a row alias ({{unsent "e"}}).
// TestSQLGolden prints every rendered statement into testdata/sql_*.golden.

//go:embed queries/*.sql
var queryFiles embed.FS

var queryTemplates = sqltemplate.Must(queryFiles, "queries/*.sql", queryFuncs)

// queries holds this dialect's relay SQL, rendered once per table name.
type queries struct {
	table      string
	sent       string   // archive of delivered rows
	claim      string   // lease, fallback: head-based
	claimScan  string   // lease, fast path: window scan
	txClaim    claimSQL // transaction-held, fast path
	txChain    claimSQL // transaction-held, fast path, behind this store's held rows
	txHeads    string   // transaction-held, fallback
	windowFull string
	floorProbe string // %[1]s is the id sequence, filled in by floor.go
	floorBelow string // the rescan: the lowest unsent id below $1
	markSent   string // lease-fenced
	markFailed string // lease-fenced
	release    string
	txSent     string // rows this transaction holds
	txFailed   string
	relock     string // FinishIsolating's second transaction
}

// claimSQL is one claim's statement in two variants: for a store that shares
// its table with other relays (with the busy check), and for one alone on it
// (Store.claimAlone).
type claimSQL struct{ shared, alone string }

func alone(a sqlArgs) sqlArgs {
	a.Alone = true
	return a
}

// sqlArgs are the named fragments of the statement templates.
type sqlArgs struct {
	Table string // the outbox, qualified
	Sent  string // its archive of delivered rows
	// Held is the array of the rows this store's other open claims hold,
	// a parameter or '{}'; Floor the parameter holding the floor, or empty
	// for a claim without one (window.sql).
	Held, Floor string
	Chain       bool   // take the rows behind the held ones (window.sql)
	Alone       bool   // no other relay on the table: no busy check (window.sql)
	Fence       bool   // touch only the rows the lease still holds
	DeleteSent  bool   // delete delivered rows instead of archiving them
	Sequence    string // the id sequence; see floor_probe.sql
	MaxRun      int    // maxRun
	HeadBound   int    // headBound
}

// queryFuncs fill in the fragments that take a row alias.
var queryFuncs = template.FuncMap{
	"unsent":      func(alias string) string { return fmt.Sprintf(unsent, alias) },
	"deliverable": func(alias string) string { return sqltemplate.Deliverable(alias, "now()") },
	"cols":        func(alias string) string { return prefixed(alias, cols) },
	"split":       splitSQL,
	"inSplit":     inSplit,
}

// unsent is true for a row not yet delivered nor dead.
const unsent = `%[1]s.status IN ('PENDING', 'RETRY', 'PROCESSING')`

func newQueries(table, sent string, deleteSent bool) queries {
	base := sqlArgs{Table: table, Sent: sent, DeleteSent: deleteSent, Sequence: "%[1]s", MaxRun: maxRun, HeadBound: headBound}
	lease := base
	lease.Held = `'{}'`
	tx := base
	tx.Held, tx.Floor = "$3", "$4"
	chain := tx
	chain.Chain = true
	fenced := base
	fenced.Fence = true
	r := queryTemplates.Render
	return queries{
		table:      table,
		sent:       sent,
		claimScan:  r("claim_lease_window.sql", lease),
		claim:      r("claim_lease_heads.sql", base),
		txClaim:    claimSQL{shared: r("claim_tx_window.sql", tx), alone: r("claim_tx_window.sql", alone(tx))},
		txChain:    claimSQL{shared: r("claim_tx_window.sql", chain), alone: r("claim_tx_window.sql", alone(chain))},
		txHeads:    r("claim_tx_heads.sql", base),
		windowFull: r("window_full.sql", base),
		floorProbe: r("floor_probe.sql", base),
		floorBelow: r("floor_below.sql", base),
		markSent:   r("mark_sent.sql", fenced),
		markFailed: r("mark_failed.sql", fenced),
		release:    r("release.sql", base),
		txSent:     r("mark_sent.sql", base),
		txFailed:   r("mark_failed.sql", base),
		relock:     r("relock.sql", base),
	}
}

// The store's statements besides the relay's claims and marks (above) live
// in queries/ too, one file per statement: the operator's, the metrics',
// the migrations', CDC's and the inbox's. The fields of stmtArgs fill in
// the table names and the parts that vary per call.
// TestSQLGoldenStatements prints every one.

// stmtArgs are the named fragments of these statement templates.
type stmtArgs struct {
	Table, Sent, Inbox, Schema string
	Slots                      string // the registry of CDC slots
	Publication                string
	Cols                       string // a record's columns (cols)
	InboxKey                   string // inboxKey
	// Per call: a filter's WHERE clause (without the keyword), List's order
	// and limit, whether List and Count read the archive, and Replay's
	// parameter holding the table's name.
	Where, Order, Limit string
	Archive             bool
	TableParam          string
	// Inbox: whether a claimed row is written PROCESSED at once, the VALUES
	// rows of a batch (processedRow), the placeholders of an id list
	// (sqltemplate.Hole in the statements rendered once, spliced per call).
	Processed bool
	Rows, IDs string
	Channel   string // LISTEN's channel, quoted
}

// statements holds the store's statements, rendered once per table name;
// those that take a filter are rendered per call (list, filtered).
type statements struct {
	args stmtArgs
	// The operator's and the metrics'.
	stats             string
	statsOldest       string
	backlog           string
	cleanupArchive    string
	cleanupTable      string
	countCleanup      string
	inboxCleanup      string
	countInboxCleanup string
	// The migrations'.
	advisoryXactLock string
	createSchema     string
	migrationsTable  string
	migrationApplied string
	migrationRecord  string
	// CDC's (cdc.go).
	walLevel          string
	publicationExists string
	createPublication string
	slotsTable        string
	cdcReady          string
	registerSlot      string
	deadMessage       string
	heldMessage       string
	confirmSlot       string
	snapshot          string
	tableExists       string
	slotLags          string
	slotState         string
	dropSlot          string
	forgetSlot        string
	createSlot        string
	slotExists        string
	pendingRows       string
	slotBackfill      string
	advisoryLock      string
	advisoryTryLock   string
	horizon           string
	advisoryUnlock    string
	stillPending      string
	rowByID           string
	// Blocking dead letters' (deadblock.go).
	ahead       string
	releaseHeld string
	blocked     string
}

func newStatements(t store.Tables) statements {
	a := stmtArgs{
		Table: t.Qualified(t.Outbox), Sent: t.Qualified(t.Outbox + "_sent"), Inbox: t.Qualified(t.Inbox), Schema: t.Schema,
		Slots: t.Qualified(t.Outbox + "_cdc_slots"), Publication: t.Outbox + "_cdc", Cols: cols,
	}
	r := func(file string) string { return queryTemplates.Render(file, a) }
	return statements{
		args:              a,
		stats:             r("stats.sql"),
		statsOldest:       r("stats_oldest.sql"),
		backlog:           r("backlog.sql"),
		cleanupArchive:    r("cleanup_archive.sql"),
		cleanupTable:      r("cleanup_table.sql"),
		countCleanup:      r("count_cleanup.sql"),
		inboxCleanup:      r("inbox_cleanup.sql"),
		countInboxCleanup: r("count_inbox_cleanup.sql"),
		advisoryXactLock:  r("advisory_xact_lock.sql"),
		createSchema:      r("create_schema.sql"),
		migrationsTable:   r("migrations_table.sql"),
		migrationApplied:  r("migration_applied.sql"),
		migrationRecord:   r("migration_record.sql"),
		walLevel:          r("wal_level.sql"),
		publicationExists: r("publication_exists.sql"),
		createPublication: r("create_publication.sql"),
		slotsTable:        r("slots_table.sql"),
		cdcReady:          r("cdc_ready.sql"),
		registerSlot:      r("register_slot.sql"),
		deadMessage:       r("dead_message.sql"),
		heldMessage:       r("held_message.sql"),
		confirmSlot:       r("confirm_slot.sql"),
		snapshot:          r("snapshot.sql"),
		tableExists:       r("table_exists.sql"),
		slotLags:          r("slot_lags.sql"),
		slotState:         r("slot_state.sql"),
		dropSlot:          r("drop_slot.sql"),
		forgetSlot:        r("forget_slot.sql"),
		createSlot:        r("create_slot.sql"),
		slotExists:        r("slot_exists.sql"),
		pendingRows:       r("pending_rows.sql"),
		slotBackfill:      r("slot_backfill.sql"),
		advisoryLock:      r("advisory_lock.sql"),
		advisoryTryLock:   r("advisory_try_lock.sql"),
		horizon:           r("horizon.sql"),
		advisoryUnlock:    r("advisory_unlock.sql"),
		stillPending:      r("still_pending.sql"),
		rowByID:           r("row_by_id.sql"),
		ahead:             r("ahead.sql"),
		releaseHeld:       r("release_held.sql"),
		blocked:           r("blocked.sql"),
	}
}

// list is List's statement: the rows where selects, in order, at most
// limit, from the archive too when archive is set.
func (st statements) list(where, order string, limit int, archive bool) string {
	a := st.args
	a.Where, a.Order, a.Limit, a.Archive = where, order, strconv.Itoa(limit), archive
	return queryTemplates.Render("list.sql", a)
}

// filtered is the statement of file (count, replay, purge) for the rows
// where selects; archive as for list, tableParam replay.sql's.
func (st statements) filtered(file, where string, archive bool, tableParam string) string {
	a := st.args
	a.Where, a.Archive, a.TableParam = where, archive, tableParam
	return queryTemplates.Render(file, a)
}

// dialectSQL are the statements of a Dialect that name no table.
var dialectSQL = struct {
	emitEvents string
	notify     string
}{
	emitEvents: queryTemplates.Render("emit_events.sql", nil),
	notify:     queryTemplates.Render("notify.sql", nil),
}

// listenSQL is LISTEN on channel, quoted.
func listenSQL(channel string) string {
	return queryTemplates.Render("listen.sql", stmtArgs{Channel: channel})
}

// inboxQueries are the Dialect's inbox statements for one inbox table.
type inboxQueries struct {
	args                 stmtArgs
	inboxInsert          string
	inboxInsertProcessed string
	inboxLookup          string
	inboxRetry           string
	inboxRetryProcessed  string
	inboxDone            string
	inboxFail            string
	versionRaise         string
	versionRead          string
	// The batch statements: inbox_insert_batch.sql with the VALUES rows
	// spliced in per call, inbox_forget.sql with the id placeholders.
	inboxInsertBatch, inboxForget sqltemplate.Spliced
}

func newInboxQueries(inbox string) inboxQueries {
	a := stmtArgs{Inbox: inbox, InboxKey: inboxKey}
	processed := a
	processed.Processed = true
	rows, ids := a, a
	rows.Rows, ids.IDs = sqltemplate.Hole, sqltemplate.Hole
	r := queryTemplates.Render
	return inboxQueries{
		args:                 a,
		inboxInsert:          r("inbox_insert.sql", a),
		inboxInsertProcessed: r("inbox_insert.sql", processed),
		inboxLookup:          r("inbox_lookup.sql", a),
		inboxRetry:           r("inbox_retry.sql", a),
		inboxRetryProcessed:  r("inbox_retry.sql", processed),
		inboxDone:            r("inbox_done.sql", a),
		inboxFail:            r("inbox_fail.sql", a),
		versionRaise:         r("version_raise.sql", a),
		versionRead:          r("version_read.sql", a),
		inboxInsertBatch:     queryTemplates.Splice("inbox_insert_batch.sql", rows),
		inboxForget:          queryTemplates.Splice("inbox_forget.sql", ids),
	}
}

// inboxSQL is the inbox statements of one Dialect's tables: a Dialect may be
// built by hand and is used on every delivery.
var inboxSQL = sqltemplate.Cache[store.Tables, inboxQueries]{Build: func(t store.Tables) (inboxQueries, error) {
	t = t.WithDefaults()
	return newInboxQueries(t.Qualified(t.Inbox)), nil
}}

// inbox returns the inbox statements for d's tables.
func (d Dialect) inbox() inboxQueries {
	q, _ := inboxSQL.Get(d.Tables)
	return q
}
