package mysql_test

import (
	"database/sql"
	"strings"
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

func TestInboxConformance(t *testing.T) { storetest.RunInbox(t, Harness{}) }

func TestSessions(t *testing.T) { storetest.RunSessions(t, Harness{}) }

// TestInboxConformanceNew: the inbox with parseTime off, server-side
// prepared statements and a non-UTC loc.
func TestInboxConformanceNew(t *testing.T) { storetest.RunInbox(t, newHarness{}) }

// TestInboxConformanceAppPool: the inbox runs in the application's
// transactions, on the application's pool, whose settings txbox does not
// choose. clientFoundRows=true makes an upsert that leaves a row as it was
// report 1 row, like an insert; a non-strict sql_mode makes the server cut
// or mangle a value that does not fit instead of failing. Dedupe must stay
// exact under both.
func TestInboxConformanceAppPool(t *testing.T) {
	storetest.RunInbox(t, newHarness{configure: func(cfg *mysqldrv.Config) {
		cfg.ClientFoundRows = true
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["sql_mode"] = "'NO_ENGINE_SUBSTITUTION'"
	}})
}

// TestInboxConformanceSimultaneousAssignment: MariaDB can evaluate the
// assignments of an UPDATE all on the old row instead of left to right; the
// inbox upserts must give the same rows either way.
func TestInboxConformanceSimultaneousAssignment(t *testing.T) {
	db, err := sql.Open("mysql", mustDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	err = db.QueryRow("SELECT VERSION()").Scan(&version)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		t.Skip("SIMULTANEOUS_ASSIGNMENT is MariaDB's")
	}
	storetest.RunInbox(t, newHarness{configure: func(cfg *mysqldrv.Config) {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["sql_mode"] = "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"
	}})
}

func mustDSN(t *testing.T) string {
	dsn, err := mysql.DSN(storetest.URL(t, "TXBOX_TEST_MYSQL"))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
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

// newHarness opens its own pool; configure, when set, changes the driver
// configuration instead of the defaults described above.
type newHarness struct {
	Harness
	configure func(*mysqldrv.Config)
}

func (h newHarness) Open(t *testing.T) store.Store {
	t.Helper()
	cfg, err := mysql.Config(storetest.URL(t, "TXBOX_TEST_MYSQL"))
	if err != nil {
		t.Fatal(err)
	}
	if h.configure != nil {
		h.configure(cfg)
	} else {
		cfg.ParseTime = false
		cfg.InterpolateParams = false
		cfg.Loc = time.FixedZone("UTC+5", 5*3600)
	}
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
		for _, tbl := range storeenv.Owned(tables) {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
		db.Close()
	})
	return s
}
