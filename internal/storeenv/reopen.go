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
	r, err := postgres.Open(context.Background(), url, postgres.Options{Tables: s.Tables()})
	if err != nil {
		t.Fatalf("reopen postgres at %s: %v", url, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Reopen is Postgres.Reopen for MySQL and MariaDB.
func (MySQL) Reopen(t *testing.T, s store.Store, url string) store.Store {
	t.Helper()
	r, err := mysql.Open(context.Background(), url, mysql.Options{Tables: s.Tables()})
	if err != nil {
		t.Fatalf("reopen mysql at %s: %v", url, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
