package pgxtx_test

import (
	"context"
	"testing"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store/postgres"
)

// Wrap reports rows affected and scans rows as store.Tx promises; an inbox
// transaction that is not shared refuses savepoints instead of sending
// them; a shared one undoes what ran since its savepoint.
func TestWrapAndInboxTransactions(t *testing.T) {
	pool := storeenv.OpenPostgres(t, postgres.Options{}).Pool()
	ctx := context.Background()
	in := pgxtx.NewInbox(pool)

	tx, err := in.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE t1 (n INT)`); err != nil {
		t.Fatal(err)
	}
	if n, err := tx.Exec(ctx, `INSERT INTO t1 VALUES ($1), ($2)`, 1, 2); err != nil || n != 2 {
		t.Fatalf("rows affected %d, %v", n, err)
	}
	var sum int
	if err := tx.QueryRow(ctx, `SELECT sum(n) FROM t1`).Scan(&sum); err != nil || sum != 3 {
		t.Fatalf("sum %d, %v", sum, err)
	}
	if err := tx.Savepoint(ctx); err == nil {
		t.Fatal("a transaction begun for one event took a savepoint")
	}
	_ = tx.Rollback(ctx)

	sh, err := in.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Rollback(ctx) }()
	if _, err := sh.Native().Exec(ctx, `CREATE TEMP TABLE t2 (n INT)`); err != nil {
		t.Fatal(err)
	}
	for i, keep := range []bool{true, false, true} {
		if err := sh.Savepoint(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Native().Exec(ctx, `INSERT INTO t2 VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		if !keep {
			if err := sh.RollbackToSavepoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var n int
	if err := sh.QueryRow(ctx, `SELECT count(*) FROM t2`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows kept %d, %v; want 2", n, err)
	}
	if w := pgxtx.Wrap(pool); w == nil {
		t.Fatal("Wrap(pool) is nil")
	}
}
