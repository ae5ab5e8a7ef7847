package faults

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
)

// ConsumerSpec is one consumer process of a world: its inbox consumer
// name, which is also its durable (NATS) or group (Kafka), and whether its
// inbox keeps per-aggregate order (VersionGuard and Ordered) or runs with
// the default configuration.
type ConsumerSpec struct {
	Proc    string
	Inbox   string
	Ordered bool
}

// Consumers are the consumer processes. Two run the inbox in Ordered mode
// on one durable, as a consumer that needs per-aggregate order does; one
// runs the default configuration on a durable of its own, so that the inbox
// record alone is what keeps its effects single (the version guard would
// drop a redelivery as stale and hide an inbox-record bug). An Ordered
// consumer and a default one cannot share a consumer name: the default one
// records no versions, so the Ordered one would wait for ever for the
// predecessors the other applied. Effects are therefore counted per
// consumer name.
var Consumers = []ConsumerSpec{
	{Proc: "consumer-0", Inbox: "inventory", Ordered: true},
	{Proc: "consumer-1", Inbox: "billing"},
	{Proc: "consumer-2", Inbox: "inventory", Ordered: true},
}

// consumerNames are the inbox consumer names of Consumers, once each, and
// whether each is Ordered.
func consumerNames() []ConsumerSpec {
	var out []ConsumerSpec
	seen := map[string]bool{}
	for _, c := range Consumers {
		if !seen[c.Inbox] {
			seen[c.Inbox] = true
			out = append(out, c)
		}
	}
	return out
}

// RunConsumer is the consumer process (see Consumers): the inbox over its
// durable, applying each event to the effects table under its consumer
// name. It returns when SIGTERM arrives (SIGKILL just ends it).
func RunConsumer() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	dumpOnSignal()
	g := os.Getenv
	cfg := inbox.Config{
		// Five attempts, spent within about two seconds: every outage the
		// harness injects outlasts them, so one that spent attempts would
		// park events (the checker's Parked).
		Name: g("FAULTS_INBOX"), MaxAttempts: 5,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, BatchSize: 100,
	}
	if g("FAULTS_ORDERED") == "1" {
		cfg.VersionGuard, cfg.Ordered = true, true
	}
	switch g("FAULTS_DB_KIND") {
	case "postgres":
		var pool *pgxpool.Pool
		var err error
		for { // the database may be cut off right now: keep trying
			if pool, err = pgxpool.New(ctx, g("FAULTS_DB")); err == nil {
				break
			}
			if !pause(ctx) {
				return nil
			}
		}
		defer pool.Close()
		audit, err := pgxpool.New(ctx, g("FAULTS_AUDIT_DB"))
		if err != nil {
			return err
		}
		defer audit.Close()
		s, err := postgres.New(pool, postgres.Options{})
		if err != nil {
			return err
		}
		return runInbox(ctx, s, cfg, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects (consumer, event_id, aggregate_id, version, n) VALUES ($1, $2, $3, $4, 1)
				ON CONFLICT (consumer, event_id) DO UPDATE SET n = effects.n + 1`, cfg.Name, ev.ID, ev.AggregateID, ev.AggregateVersion)
			if err != nil {
				return err
			}
			// A write outside the inbox's transaction, as a handler calling
			// another service does: when that database is away the handler
			// fails with a lost connection, which must spend no attempt.
			_, err = audit.Exec(ctx, `INSERT INTO audit (event_id, consumer) VALUES ($1, $2) ON CONFLICT DO NOTHING`, ev.ID, g("FAULTS_NAME"))
			return err
		})
	case "mysql":
		var s *mysql.Store
		var err error
		for {
			if s, err = mysql.Open(ctx, g("FAULTS_DB"), mysql.Options{}); err == nil {
				break
			}
			if !pause(ctx) {
				return nil
			}
		}
		defer s.Close()
		dsn, err := mysql.DSN(g("FAULTS_AUDIT_DB"))
		if err != nil {
			return err
		}
		audit, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer audit.Close()
		return runInbox(ctx, s, cfg, func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (consumer, event_id, aggregate_id, version, n) VALUES (?, ?, ?, ?, 1)
				ON DUPLICATE KEY UPDATE n = n + 1`, cfg.Name, ev.ID, ev.AggregateID, ev.AggregateVersion)
			if err != nil {
				return err
			}
			// As on PostgreSQL: a write beside the inbox's transaction.
			_, err = audit.ExecContext(ctx, `INSERT IGNORE INTO audit (event_id, consumer) VALUES (?, ?)`, ev.ID, g("FAULTS_NAME"))
			return err
		})
	}
	return fmt.Errorf("FAULTS_DB_KIND %q", g("FAULTS_DB_KIND"))
}

func runInbox[T any](ctx context.Context, st store.InboxStore[T], cfg inbox.Config, apply func(context.Context, T, txbox.Event) error) error {
	var sub broker.Subscriber
	var err error
	for { // the broker may be down or cut off right now
		if sub, err = openSubscriber(ctx, cfg.Name); err == nil {
			break
		}
		if !pause(ctx) {
			return nil
		}
	}
	defer sub.Close()
	cfg.Subscriber = consumerSubscriber(sub)
	st, cfg = consumerInbox(st, cfg)
	c, err := inbox.New(st, cfg, apply)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

func openSubscriber(ctx context.Context, durable string) (broker.Subscriber, error) {
	g := os.Getenv
	switch g("FAULTS_BROKER_KIND") {
	case "nats":
		return natsbroker.OpenSubscriber(ctx, g("FAULTS_BROKER"), natsbroker.SubscriberOptions{
			Stream: g("FAULTS_STREAM"), Durable: durable, AckWait: 3 * time.Second, MaxAckPending: 2000, Connection: natsbroker.Connection{Name: g("FAULTS_NAME")}})
	case "kafka":
		// A member SIGKILLed leaves the group when its session times out:
		// short, so that its partitions do not wait the default 45 s.
		return kafkabroker.OpenSubscriber(ctx, g("FAULTS_BROKER"), kafkabroker.SubscriberOptions{
			Group: durable, Topics: []string{g("FAULTS_STREAM")}, AckWait: 3 * time.Second,
			Connection: kafkabroker.Connection{Name: g("FAULTS_NAME"),
				ClientOptions: []kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(time.Second),
					kgo.RebalanceTimeout(10 * time.Second), kgo.MetadataMaxAge(2 * time.Second)}}})
	}
	return nil, fmt.Errorf("FAULTS_BROKER_KIND %q", g("FAULTS_BROKER_KIND"))
}

// pause waits before the next attempt; false when the process is to stop.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(300 * time.Millisecond):
		return true
	}
}

// dumpOnSignal writes every goroutine's stack to stderr, which the world
// keeps, at each SIGUSR1: the harness sends it to consumers that stopped
// making progress (NATS.caughtUp), so that the report shows where they
// wait.
func dumpOnSignal() {
	usr := make(chan os.Signal, 1)
	signal.Notify(usr, syscall.SIGUSR1)
	go func() {
		for range usr {
			fmt.Fprintf(os.Stderr, "goroutines at %s (SIGUSR1):\n", time.Now().UTC().Format(time.RFC3339Nano))
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		}
	}()
}
