package mysql_test

import (
	"database/sql"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, Harness{})
}

// Harness is the shared MySQL harness of storetest and the scenarios.
type Harness = storeenv.MySQL

// OpenTest opens a store on fresh tables, dropped when t ends.
func OpenTest(t testing.TB, opts mysql.Options) *mysql.Store { return storeenv.OpenMySQL(t, opts) }

// TestStoreConformanceNew runs the suite on a store made with New over a pool
// with the driver's defaults (no parseTime, server-side prepared statements)
// and a non-UTC loc: timestamps must still round-trip as UTC.
func TestStoreConformanceNew(t *testing.T) {
	storetest.Run(t, newHarness{})
}

type newHarness struct{ Harness }

func (newHarness) Open(t *testing.T) store.Store {
	t.Helper()
	cfg, err := mysql.Config(storetest.URL(t, "TXBOX_TEST_MYSQL"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = false
	cfg.InterpolateParams = false
	cfg.Loc = time.FixedZone("UTC+5", 5*3600)
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	suffix := txbox.NewID()[24:]
	tables := store.Tables{Outbox: "outbox_n" + suffix, Inbox: "inbox_n" + suffix}
	s, err := mysql.New(db, mysql.Options{Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{tables.Outbox, tables.Outbox + "_sent", tables.Inbox, tables.Outbox + "_migrations"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
		db.Close()
	})
	return s
}
