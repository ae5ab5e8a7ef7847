// Command orderservice is the writing side of the txbox example: it places
// orders, each in one PostgreSQL transaction with its OrderCreated event.
// Every tenth order is rolled back on purpose: its event must never appear.
//
//	go run ./examples/orderservice -orders 100
//	txbox relay --db $DB --broker nats://127.0.0.1:4222 --nats-create-stream
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

var errRejected = errors.New("order rejected by a business rule")

func main() {
	db := flag.String("db", envOr("TXBOX_DB", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL")
	outboxTable := flag.String("outbox-table", "outbox_event", "outbox table")
	orders := flag.Int("orders", 100, "orders to place")
	prefix := flag.String("prefix", "ord", "order id prefix")
	flag.Parse()
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.Options{Tables: store.Tables{Outbox: *outboxTable}})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS shop_orders (id TEXT PRIMARY KEY, sku TEXT NOT NULL, qty INT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	w := outbox.NewWriter(s.Dialect())

	placed, rejected := 0, 0
	for i := range *orders {
		id := fmt.Sprintf("%s-%d", *prefix, i)
		err := pgxtx.Run(ctx, pool, w, func(ctx context.Context, tx pgx.Tx, rec *outbox.Recorder) error {
			return placeOrder(ctx, tx, id, fmt.Sprintf("sku-%d", i%5), 1+i%3, i%10 == 9)
		})
		switch {
		case errors.Is(err, errRejected):
			rejected++
		case err != nil:
			log.Fatal(err)
		default:
			placed++
		}
	}
	fmt.Printf("placed %d orders, rolled back %d\n", placed, rejected)
}

// placeOrder is business code: it writes the order and records the domain
// event; the unit of work writes the event to the outbox just before COMMIT.
func placeOrder(ctx context.Context, tx pgx.Tx, id, sku string, qty int, reject bool) error {
	if _, err := tx.Exec(ctx, `INSERT INTO shop_orders (id, sku, qty) VALUES ($1, $2, $3)`, id, sku, qty); err != nil {
		return err
	}
	ev, err := txbox.NewEvent("Order", id, "OrderCreated", map[string]any{"order_id": id, "sku": sku, "qty": qty})
	if err != nil {
		return err
	}
	if err := outbox.Record(ctx, ev); err != nil {
		return err
	}
	if reject {
		return errRejected // rolls back the order and its event together
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
