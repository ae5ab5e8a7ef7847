package faults

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store/postgres"
)

// RunConsumer is the consumer process: the inbox in Ordered mode over a
// shared durable, applying each event to the effects table. It returns when
// SIGTERM arrives (SIGKILL just ends it).
func RunConsumer() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	g := os.Getenv
	var pool *pgxpool.Pool
	var err error
	for { // the database may be cut off right now: keep trying
		if pool, err = pgxpool.New(ctx, g("FAULTS_DB")); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.Options{})
	if err != nil {
		return err
	}
	var sub *natsbroker.Subscriber
	for {
		sub, err = natsbroker.OpenSubscriber(ctx, g("FAULTS_NATS"), natsbroker.SubscriberOptions{
			Stream: g("FAULTS_STREAM"), Durable: "inventory", AckWait: 3 * time.Second, MaxAckPending: 2000, Name: g("FAULTS_NAME")})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	defer sub.Close()
	st, cfg := consumerInbox(s, inbox.Config{
		Name: "inventory", Subscriber: consumerSubscriber(sub),
		VersionGuard: true, Ordered: true, MaxAttempts: 1000,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, BatchSize: 100,
	})
	c, err := inbox.New(st, cfg, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, aggregate_id, version, n) VALUES ($1, $2, $3, 1)
			ON CONFLICT (event_id) DO UPDATE SET n = effects.n + 1`, ev.ID, ev.AggregateID, ev.AggregateVersion)
		return err
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
