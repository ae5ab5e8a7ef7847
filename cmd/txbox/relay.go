package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/relay"
)

func newRelay(g *globals) *cobra.Command {
	var cfg relay.Config
	var po open.PublisherOptions
	var migrate bool
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Deliver outbox rows to the broker until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg.Topic = broker.Topic(g.topic)
			cfg.Logger = g.log
			if err := cfg.Topic.Validate(); err != nil {
				return err
			}
			s, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			if migrate {
				if err := s.Migrate(ctx); err != nil {
					return err
				}
			}
			po.Logger = g.log
			pub, err := open.Publisher(ctx, g.broker, po)
			if err != nil {
				return err
			}
			defer pub.Close()
			cfg.Store, cfg.Publisher = s, pub
			r, err := relay.New(cfg)
			if err != nil {
				return err
			}
			g.log.Info("relay connected", "db", open.Redact(g.db), "broker", open.Redact(g.broker))
			return r.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.BatchSize, "batch-size", 500, "rows per claim")
	f.DurationVar(&cfg.PollInterval, "poll-interval", 500*time.Millisecond, "idle wait between claims")
	f.DurationVar(&cfg.Lease, "lease", 30*time.Second, "how long claimed rows stay reserved")
	f.DurationVar(&cfg.PublishTimeout, "publish-timeout", 10*time.Second, "bound on one publish round (at most half the lease)")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", 10, "failed publishes before a row is DEAD")
	f.DurationVar(&cfg.BackoffBase, "backoff-base", time.Second, "first retry delay")
	f.DurationVar(&cfg.BackoffMax, "backoff-max", 300*time.Second, "retry delay cap")
	f.StringVar(&cfg.Source, "source", "txbox", "CloudEvents source attribute")
	f.StringVar(&cfg.ID, "relay-id", "", "name in locked_by (default host-pid-random)")
	f.BoolVar(&migrate, "migrate", false, "apply migrations before starting")
	po.AddFlags(f)
	return cmd
}
