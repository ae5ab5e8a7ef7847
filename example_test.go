package txbox_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store/postgres"
)

// Write an order and its event in one transaction. The relay (`txbox relay`)
// delivers the event after COMMIT; a rollback would have emitted nothing.
// It prints "committed: true".
func Example_writeInTransaction() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	s, _ := postgres.New(pool, postgres.Options{})
	if err := s.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_orders (id TEXT PRIMARY KEY, amount INT)`)
	w := outbox.NewWriter(s.Dialect())

	orderID := "ord-" + txbox.NewID()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO example_orders (id, amount) VALUES ($1, $2)`, orderID, 4200); err != nil {
			return err
		}
		ev, err := txbox.NewEvent("Order", orderID, "OrderCreated", map[string]any{"id": orderID, "amount": 4200})
		if err != nil {
			return err
		}
		return pgxtx.Add(ctx, tx, w, ev)
	})
	fmt.Println("committed:", err == nil)
}

// The example needs PostgreSQL at DATABASE_URL, so it has no "Output:"
// for `go test` to check without it: this test runs it where the database
// is, and skips (fails under TXBOX_REQUIRE_SERVICES=1) where it is not.
func TestExampleWriteInTransaction(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.URL(t, "TXBOX_TEST_POSTGRES"))
	testenv.CheckExample(t, Example_writeInTransaction, "committed: true")
}
