// Command inventoryservice is the consuming side of the txbox example: it
// reserves stock for every OrderCreated event, exactly once, however often
// the event is delivered. The reservation and the inbox row commit together.
//
//	go run ./examples/inventoryservice
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

func main() {
	db := flag.String("db", envOr("INVENTORY_DB", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "inventory's PostgreSQL URL")
	inboxTable := flag.String("inbox-table", "inbox_event", "inbox table")
	natsURL := flag.String("nats", envOr("TXBOX_BROKER", "nats://127.0.0.1:4222"), "NATS URL")
	stream := flag.String("stream", "TXBOX", "JetStream stream")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.Options{Tables: store.Tables{Inbox: *inboxTable}})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS inventory_reservations (
		order_id TEXT PRIMARY KEY, sku TEXT NOT NULL, qty INT NOT NULL, reserved_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		log.Fatal(err)
	}

	// The stream is created by the relay (--nats-create-stream); a consumer
	// that starts first waits for it instead of exiting.
	var sub *natsbroker.Subscriber
	for attempt := 0; ; attempt++ {
		sub, err = natsbroker.OpenSubscriber(ctx, *natsURL, natsbroker.SubscriberOptions{
			Stream: *stream, Durable: "inventory", FilterSubjects: []string{"outbox.Order.OrderCreated"}, AckWait: 30 * time.Second,
		})
		if err == nil {
			break
		}
		if attempt >= 60 || ctx.Err() != nil {
			log.Fatal(err)
		}
		log.Printf("waiting for the stream: %v", err)
		time.Sleep(500 * time.Millisecond)
	}
	defer sub.Close()

	c, err := inbox.New(s, inbox.Config{
		Name:       "inventory",
		Subscriber: sub,
		Logger:     slog.Default(),
	}, reserve)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
	ct := c.Stats()
	log.Printf("processed %d, duplicates absorbed %d, parked %d", ct.Processed, ct.Duplicates, ct.Parked)
}

// reserve is the handler: its writes share the transaction of the inbox row.
func reserve(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
	var o struct {
		OrderID string `json:"order_id"`
		SKU     string `json:"sku"`
		Qty     int    `json:"qty"`
	}
	if err := json.Unmarshal(ev.Payload, &o); err != nil {
		return err
	}
	// A plain INSERT on purpose: were an event applied twice, the primary
	// key would fail loudly instead of hiding the bug.
	_, err := tx.Exec(ctx, `INSERT INTO inventory_reservations (order_id, sku, qty) VALUES ($1, $2, $3)`, o.OrderID, o.SKU, o.Qty)
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
