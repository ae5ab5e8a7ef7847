package storeenv

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
)

// MySQL runs against TXBOX_TEST_MYSQL (default: the local MariaDB).
type MySQL struct{}

func (MySQL) URL(t *testing.T, _ store.Store) string { return testenv.URL(t, "TXBOX_TEST_MYSQL") }

func (MySQL) Open(t *testing.T) store.Store { return OpenMySQL(t, mysql.Options{}) }

// OpenMySQL opens a store on fresh tables, dropped when t ends.
func OpenMySQL(t testing.TB, opts mysql.Options) *mysql.Store {
	t.Helper()
	url := testenv.URL(t, "TXBOX_TEST_MYSQL")
	opts.Tables = Fresh()
	s, err := mysql.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		for _, tbl := range Owned(opts.Tables) {
			_, _ = s.DB().ExecContext(ctx, "DROP TABLE IF EXISTS "+tbl)
		}
		s.Close()
	})
	return s
}

// SQLDB is the store's *sql.DB.
func (MySQL) SQLDB(_ *testing.T, s store.Store) *sql.DB { return s.(*mysql.Store).DB() }

func (MySQL) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	tx, err := s.(*mysql.Store).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() }) // see Postgres.Begin
	return store.SQLTx(tx), tx.Commit, tx.Rollback
}

func (MySQL) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	ms := s.(*mysql.Store)
	_, err := ms.DB().Exec(fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (?, ?, ?, ?, ?)`,
		ms.Tables().Outbox), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}
