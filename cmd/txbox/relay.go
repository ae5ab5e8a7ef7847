package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/otel"
	"github.com/txbox/txbox/telemetry/prom"
)

func newRelay(g *globals) *cobra.Command {
	var cfg relay.Config
	var migrate, split, failFast bool
	var wakeup, claims string
	var obs obsFlags
	var cf cdcFlags
	var cl cleanupFlags
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Deliver outbox rows to the broker until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg.Topic = broker.Topic(g.topic)
			cfg.Claims = relay.ClaimMode(claims)
			cfg.Logger = g.log
			cfg.MaxPendingAge, cfg.StallAfter, cfg.MetricsInterval = obs.maxPendingAge, obs.stallAfter, obs.metricsInterval
			cfg.LongTransactionWarn = obs.longTxWarn
			if err := rejectZeroRelayFlags(cfg, g.topic); err != nil {
				return err
			}
			if err := cfg.ValidateSettings(); err != nil {
				return err
			}
			if err := open.CheckPublisherURL(g.broker); err != nil {
				return err
			}
			if err := open.CheckTopic(g.broker, cfg.Topic); err != nil {
				return err
			}
			if err := open.CheckBrokerFlags(g.broker); err != nil {
				return err
			}
			if err := cf.check(g.db, wakeup); err != nil {
				return err
			}
			if err := cl.check(nil); err != nil {
				return err
			}
			switch {
			case wakeup != "poll" && wakeup != "listen":
				return &txbox.ConfigError{Field: flagField("wakeup"), Reason: fmt.Sprintf("%q: want poll or listen", wakeup)}
			case wakeup == "listen" && !isPostgresURL(g.db):
				return &txbox.ConfigError{Field: flagField("wakeup"), Reason: "listen needs a PostgreSQL database"}
			}
			open.UseTopic(cfg.Topic)
			ln, err := obs.listen()
			if err != nil {
				return err
			}
			st := newStartState(g.db, g.broker)
			var srv *obsServer
			var cm *cleanupMetrics
			if ln != nil {
				reg, wrapped := newRegistry(g.db, g.broker)
				cfg.Metrics = prom.NewRelayMetrics(wrapped)
				if cl.every > 0 {
					cm = newCleanupMetrics(wrapped)
				}
				startReg := prometheus.NewRegistry()
				st.register(labelled(startReg, g.db, g.broker))
				srv = serveObs(ctx, ln, reg, startReg, st, g.log)
			}
			tp, stopTracing, err := setupTracing(ctx, g.log)
			if err != nil {
				return err
			}
			defer stopTracing()
			if tp != nil {
				cfg.Tracer = otel.NewTracer(tp)
			}
			g.noSplit = !split
			g.migrating = migrate
			wait := waitPolicy{log: g.log, base: min(cfg.BackoffBase, cfg.OutageProbeMax), max: cfg.OutageProbeMax, failFast: failFast}
			s, pub, err := g.connect(ctx, st, wait, migrate)
			if errors.Is(err, errStopped) {
				return nil // stopped while waiting for the database or the broker: a clean stop
			}
			if err != nil {
				return err
			}
			defer s.Close()
			defer pub.Close()
			if cl.every > 0 {
				if err := cl.check(s); err != nil {
					return err
				}
				// Stopped and waited for before the store closes: a store's
				// Close waits for the connection a cleanup holds.
				var wg sync.WaitGroup
				lctx, stop := context.WithCancel(ctx)
				defer wg.Wait()
				defer stop()
				wg.Go(func() {
					cleanupLoop{every: cl.every, olderThan: cl.olderThan, inboxKeep: cl.inboxKeep, log: g.log, m: cm}.run(lctx, s)
				})
			}
			if ps, ok := s.(*postgres.Store); ok && wakeup == "listen" {
				cfg.Wakeup = postgres.Listen(ctx, ps.Pool(), postgres.WakeupChannel(ps.Tables().Outbox), g.log)
			}
			cfg.Store, cfg.Publisher = relayStore(s), pub
			tuneGC()
			if cf.mode == modeCDC {
				ps, ok := s.(*postgres.Store)
				if !ok {
					return &txbox.ConfigError{Field: flagField("mode"), Reason: "cdc needs a PostgreSQL database"}
				}
				return runCDC(ctx, g, cfg, cf, ps, srv)
			}
			r, err := startRelay(ctx, srv, func() (*relay.Relay, error) { return relay.New(cfg) })
			if err != nil {
				return err
			}
			srv.warnOf(r, cfg.LongTransactionWarn)
			g.log.Info("relay connected", "db", redact.URL(g.db), "broker", redact.URL(g.broker))
			return r.Run(ctx)
		},
	}
	f := cmd.Flags()
	// Defaults are the library's (relay.Default*): one source.
	f.StringVar(&g.broker, "broker", "", "broker URL: nats://, kafka://, amqp:// (RabbitMQ), redis://, mqtt://, http(s):// (webhook)")
	f.StringVar(&g.topic, "topic", broker.DefaultTopic, "destination template over {aggregate_type} and {event_type}")
	f.BoolVar(&g.deleteSent, "delete-sent", false, "delete rows once the broker confirmed them instead of moving them to the <outbox>_sent archive (MySQL, PostgreSQL) or keeping them as SENT (SQLite)")
	f.IntVar(&cfg.BatchSize, "batch-size", relay.DefaultBatchSize, "rows per claim (--mode cdc: events published and recorded before the slot's position is confirmed)")
	f.IntVar(&cfg.Workers, "workers", relay.DefaultWorkers, "claimed batches published concurrently")
	f.DurationVar(&cfg.PollInterval, "poll-interval", relay.DefaultPollInterval, "time from the start of a claim that found nothing to the next claim, without a wake-up (the pause is at least half of it)")
	f.DurationVar(&cfg.IdlePollMax, "idle-poll-max", 0, fmt.Sprintf("an idle relay's longest wait between claims: while claims find nothing the wait doubles from --poll-interval up to this; equal to --poll-interval: no back-off (default min(%v, 2 x --poll-interval), or --poll-interval if that is longer)", relay.DefaultIdlePollMax))
	f.StringVar(&claims, "claims", string(relay.ClaimAuto), "auto: hold claimed rows with the claim's open transaction where the database can (PostgreSQL), else a lease; lease: always a lease written into the rows (PgBouncer statement pooling)")
	f.DurationVar(&cfg.Lease, "lease", relay.DefaultLease, "how long claimed rows stay reserved (with transaction claims: how long one claim may stay open)")
	f.DurationVar(&cfg.PublishTimeout, "publish-timeout", 0, fmt.Sprintf("bound on one publish round, at most half the lease (default min(%v, lease/3))", relay.DefaultPublishTimeout))
	f.IntVar(&cfg.MaxAttempts, "max-attempts", relay.DefaultMaxAttempts, "failed publishes before a row is DEAD")
	f.DurationVar(&cfg.BackoffBase, "backoff-base", relay.DefaultBackoffBase, "first retry delay")
	f.DurationVar(&cfg.BackoffMax, "backoff-max", relay.DefaultBackoffMax, "retry delay cap")
	f.DurationVar(&cfg.OutageProbeMax, "outage-probe-max", relay.DefaultOutageProbeMax, "longest wait between probes of a broker that is out (unreachable, not confirming, no stream for a subject), doubling from --backoff-base: such an outage spends no attempts and pauses claiming until a probe gets through; also the longest wait between tries to reach the database or the broker at start")
	f.BoolVar(&failFast, "fail-fast", false, "exit 1 at once when the database or the broker cannot be reached at start. Default: wait for them, trying again up to every --outage-probe-max, with a log line when the wait starts and one when it ends, txbox_relay_ready, txbox_relay_database_up and txbox_relay_broker_up at 0 and /readyz failing with the reason: a relay started before its database or broker (a deploy, a restart of both) waits visibly instead of crash-looping. Configuration errors exit 2 at once either way")
	f.StringSliceVar(&cfg.DeadBlocks, "dead-blocks", nil, "aggregate types (comma-separated, or '*' for all) whose DEAD events hold back every later event of their aggregate until replayed (txbox dead replay: it goes first, then the held ones in order) or purged (the held ones go on); default: a DEAD event blocks nothing. Every relay of a table needs the same list: a relay releases the rows held behind types it does not list")
	f.StringVar(&cfg.Source, "source", relay.DefaultSource, "CloudEvents source attribute")
	f.StringVar(&cfg.ID, "relay-id", "", "name in locked_by (default host-pid-random)")
	f.BoolVar(&migrate, "migrate", false, "apply migrations before starting")
	f.BoolVar(&split, "split", true, "split the aggregates with the other relays of the table, so their claims do not meet each other's rows (PostgreSQL with transaction claims: each relay holds a session advisory lock; --split=false through a pooler in transaction mode)")
	f.StringVar(&wakeup, "wakeup", "poll", "poll, or listen: PostgreSQL LISTEN for writers using outbox.WithWakeup (polling stays the fallback; not through PgBouncer transaction pooling)")
	cf.add(f)
	cl.add(f)
	obs.add(f)
	open.AddPublisherFlags(f)
	return cmd
}

// tuneGC trades memory the relay does not need for CPU it does: every batch
// allocates its rows and messages afresh and drops them, so the collector
// runs often over a small live heap, and GOGC=300 saves relay CPU for some
// memory (BENCHMARKS.md, "Figures behind choices in the code"); a soft limit
// of 96 MiB makes the collector work harder before the heap grows past it.
// GOGC and GOMEMLIMIT in the environment win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(96 << 20)
	}
}
