package storeenv

import (
	"database/sql"
	"testing"

	"github.com/txbox/txbox/store"
)

// Effects is the business table of an inbox test, beside a store's fresh
// tables: one row per event id whose n counts how often a handler applied
// the event, so that an event applied twice shows as n = 2.
type Effects struct {
	Table string
	// Upsert applies an event once more in the store's dialect; its one
	// argument is the event id.
	Upsert string
	db     *sql.DB
}

// NewEffects creates the effects table of s on db (s's database, as the
// handlers reach it) and drops it when t ends.
func NewEffects(t testing.TB, s store.Store, db *sql.DB) *Effects {
	t.Helper()
	e := &Effects{Table: "effects_" + s.Tables().Outbox, db: db}
	if _, err := db.Exec(`CREATE TABLE ` + e.Table + ` (event_id VARCHAR(64) NOT NULL PRIMARY KEY, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + e.Table) })
	switch s.Dialect().Name() {
	case "postgres":
		e.Upsert = `INSERT INTO ` + e.Table + ` (event_id, n) VALUES ($1, 1) ON CONFLICT (event_id) DO UPDATE SET n = ` + e.Table + `.n + 1`
	case "mysql":
		e.Upsert = `INSERT INTO ` + e.Table + ` (event_id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1`
	default:
		e.Upsert = `INSERT INTO ` + e.Table + ` (event_id, n) VALUES (?, 1) ON CONFLICT (event_id) DO UPDATE SET n = n + 1`
	}
	return e
}

// Counts maps every applied event id to its n.
func (e *Effects) Counts(t testing.TB) map[string]int {
	t.Helper()
	rows, err := e.db.Query(`SELECT event_id, n FROM ` + e.Table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}
