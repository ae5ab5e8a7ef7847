package storeenv

import (
	"context"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
)

// Reopen opens s's tables again at url (the same database reached another
// way, such as through a testenv.Proxy a test can cut), closed when t
// ends; the tables stay s's to drop.
func (Postgres) Reopen(t *testing.T, s store.Store, url string) store.Store {
	t.Helper()
	return reopen(t, "postgres", url, func(ctx context.Context) (*postgres.Store, error) {
		return postgres.Open(ctx, url, postgres.Options{Tables: s.Tables()})
	})
}

// Reopen is Postgres.Reopen for MySQL and MariaDB.
func (MySQL) Reopen(t *testing.T, s store.Store, url string) store.Store {
	t.Helper()
	return reopen(t, "mysql", url, func(ctx context.Context) (*mysql.Store, error) {
		return mysql.Open(ctx, url, mysql.Options{Tables: s.Tables()})
	})
}

func reopen[S store.Store](t *testing.T, dialect, url string, open func(context.Context) (S, error)) store.Store {
	t.Helper()
	r, err := open(context.Background())
	if err != nil {
		t.Fatalf("reopen %s at %s: %v", dialect, url, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
