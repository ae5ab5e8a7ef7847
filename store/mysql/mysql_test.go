package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, Harness{})
}

// Harness runs storetest on the local MySQL / MariaDB, each test on its own
// tables.
type Harness struct{}

func (Harness) Open(t *testing.T) store.Store {
	t.Helper()
	return OpenTest(t, mysql.Options{})
}

// OpenTest opens a store on fresh tables in the test database and drops them
// when t ends.
func OpenTest(t testing.TB, opts mysql.Options) *mysql.Store {
	t.Helper()
	url := storetest.URL(t, "TXBOX_TEST_MYSQL")
	ctx := context.Background()
	suffix := txbox.NewID()[24:]
	opts.Tables = store.Tables{Outbox: "outbox_t" + suffix, Inbox: "inbox_t" + suffix}
	s, err := mysql.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{opts.Tables.Outbox, opts.Tables.Outbox + "_sent", opts.Tables.Inbox, opts.Tables.Outbox + "_migrations"} {
			_, _ = s.DB().Exec("DROP TABLE IF EXISTS " + tbl)
		}
		s.Close()
	})
	return s
}

func (Harness) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	tx, err := s.(*mysql.Store).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return store.SQLTx(tx), tx.Commit, tx.Rollback
}

func (Harness) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	ms := s.(*mysql.Store)
	_, err := ms.DB().Exec(fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (?, ?, ?, ?, ?)`,
		ms.Tables().Outbox), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}

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
