package txbox_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres"
)

// Apply an event exactly once although the broker delivers it twice: the
// consumer is set up from the store in one call, and the handler's write
// shares the transaction of the inbox row. It prints "applied: 1
// duplicates absorbed: 1".
func Example_consumeExactlyOnce() {
	ctx := context.Background()
	st, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	pool := st.Pool() // the application's own statements share the store's pool
	if err := st.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_reservations (event_id TEXT, sku TEXT)`)

	b := membroker.New(membroker.Options{}) // any broker.Subscriber: NATS, Kafka, RabbitMQ, ...
	sub := b.Subscribe("inventory")
	c, err := inbox.New(st, inbox.Config{Name: "inventory", Subscriber: sub},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO example_reservations (event_id, sku) VALUES ($1, 'sku-1')`, ev.ID)
			return err
		})
	if err != nil {
		fmt.Println(err)
		return
	}

	ev := txbox.MustEvent("Order", "ord-1", "OrderPlaced", map[string]any{"sku": "sku-1"})
	msg := broker.Message{Event: ev, Topic: "orders", Source: "example"}
	b.Publish(ctx, []broker.Message{msg, msg}) // delivered twice, as after a relay crash

	runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	go func() {
		for s := c.Stats(); s.Processed+s.Duplicates < 2 && runCtx.Err() == nil; s = c.Stats() {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
	}()
	_ = c.Run(runCtx)

	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM example_reservations WHERE event_id = $1`, ev.ID).Scan(&n)
	fmt.Println("applied:", n, "duplicates absorbed:", c.Stats().Duplicates)
}

// Run where PostgreSQL is, as TestExampleWriteInTransaction.
func TestExampleConsumeExactlyOnce(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.URL(t, "TXBOX_TEST_POSTGRES"))
	testenv.CheckExample(t, Example_consumeExactlyOnce, "applied: 1 duplicates absorbed: 1")
}
