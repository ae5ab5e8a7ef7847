package storeenv

import (
	"context"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
)

// MySQL runs against TXBOX_TEST_MYSQL (default: the local MariaDB).
type MySQL struct{ onSQL }

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
	dropAtEnd(t, opts.Tables, func(ctx context.Context, stmt string) { _, _ = s.DB().ExecContext(ctx, stmt) }, s.Close)
	return s
}
