package postgres

import (
	"embed"
	"fmt"
	"text/template"

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
	sent       string // archive of delivered rows
	claim      string // lease, fallback: head-based
	claimScan  string // lease, fast path: window scan
	txClaim    string // transaction-held, fast path
	txChain    string // transaction-held, fast path, behind this store's held rows
	txHeads    string // transaction-held, fallback
	windowFull string
	floorProbe string // %[1]s is the id sequence, filled in by floor.go
	floorBelow string // the rescan: the lowest unsent id below $1
	markSent   string // lease-fenced
	markFailed string // lease-fenced
	release    string
	txSent     string // rows this transaction holds
	txFailed   string
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
	Fence       bool   // touch only the rows the lease still holds
	DeleteSent  bool   // delete delivered rows instead of archiving them
	Sequence    string // the id sequence; see floor_probe.sql
	MaxRun      int    // maxRun
	HeadBound   int    // headBound
}

// queryFuncs fill in the fragments that take a row alias.
var queryFuncs = template.FuncMap{
	"unsent":      func(alias string) string { return fmt.Sprintf(unsent, alias) },
	"deliverable": func(alias string) string { return fmt.Sprintf(deliverable, alias) },
	"cols":        func(alias string) string { return prefixed(alias, cols) },
	"split":       splitSQL,
	"inSplit":     inSplit,
}

// unsent is true for a row not yet delivered nor dead.
const unsent = `%[1]s.status IN ('PENDING', 'RETRY', 'PROCESSING')`

// deliverable is true for a row a claimer may take now. It is NULL for a
// RETRY or PROCESSING row without next_retry_at or locked_until (written
// by hand), which a claim must read as false.
const deliverable = `(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= now())
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= now()))`

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
		txClaim:    r("claim_tx_window.sql", tx),
		txChain:    r("claim_tx_window.sql", chain),
		txHeads:    r("claim_tx_heads.sql", base),
		windowFull: r("window_full.sql", base),
		floorProbe: r("floor_probe.sql", base),
		floorBelow: r("floor_below.sql", base),
		markSent:   r("mark_sent.sql", fenced),
		markFailed: r("mark_failed.sql", fenced),
		release:    r("release.sql", base),
		txSent:     r("mark_sent.sql", base),
		txFailed:   r("mark_failed.sql", base),
	}
}
