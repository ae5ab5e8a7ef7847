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

// consumerDurable is the consumers' durable consumer on the stream.
const consumerDurable = "inventory"

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
	// The database the handler writes to beside the inbox's: the
	// handler's-database-down fault cuts it off.
	audit, err := pgxpool.New(ctx, g("FAULTS_AUDIT_DB"))
	if err != nil {
		return err
	}
	defer audit.Close()
	var sub *natsbroker.Subscriber
	for {
		sub, err = natsbroker.OpenSubscriber(ctx, g("FAULTS_NATS"), natsbroker.SubscriberOptions{
			Stream: g("FAULTS_STREAM"), Durable: consumerDurable, AckWait: 3 * time.Second, MaxAckPending: 2000, Name: g("FAULTS_NAME")})
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
		// Five attempts, spent within about two seconds: every outage the
		// harness injects outlasts them, so one that spent attempts would
		// park events (the checker's Parked).
		VersionGuard: true, Ordered: true, MaxAttempts: 5,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, BatchSize: 100,
	})
	c, err := inbox.New(st, cfg, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, aggregate_id, version, n) VALUES ($1, $2, $3, 1)
			ON CONFLICT (event_id) DO UPDATE SET n = effects.n + 1`, ev.ID, ev.AggregateID, ev.AggregateVersion)
		if err != nil {
			return err
		}
		// A write outside the inbox's transaction, as a handler calling
		// another service does: when that database is away the handler
		// fails with a lost connection, which must spend no attempt.
		_, err = audit.Exec(ctx, `INSERT INTO audit (event_id, consumer) VALUES ($1, $2) ON CONFLICT DO NOTHING`, ev.ID, g("FAULTS_NAME"))
		return err
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
