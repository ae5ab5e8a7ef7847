package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// Relay modes.
const (
	modePoll = "poll"
	modeCDC  = "cdc"
)

// cdcFlags are the relay's change data capture settings.
type cdcFlags struct {
	mode    string
	slot    string
	lagWarn int64
}

func (c *cdcFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.mode, "mode", modePoll, "poll: claim rows from the outbox table; cdc: read the PostgreSQL log through logical replication (needs --slot, wal_level = logical and 'txbox migrate --cdc')")
	f.StringVar(&c.slot, "slot", "", "replication slot of --mode cdc (created on first use; lower-case letters, digits, _)")
	f.Int64Var(&c.lagWarn, "slot-lag-warn", cdc.DefaultLagWarnBytes, "--mode cdc: log a warning while a txbox replication slot holds more WAL than this many bytes (0: never)")
}

// check validates the flags before anything connects.
func (c *cdcFlags) check(db, wakeup string) error {
	if c.lagWarn < 0 {
		return &txbox.ConfigError{Field: flagField("slot-lag-warn"), Reason: fmt.Sprintf("%d is negative: want a number of bytes, or 0 for no warning", c.lagWarn)}
	}
	switch c.mode {
	case modePoll:
		if c.slot != "" {
			return &txbox.ConfigError{Field: flagField("slot"), Reason: "only with --mode cdc"}
		}
		return nil
	case modeCDC:
	default:
		return &txbox.ConfigError{Field: flagField("mode"), Reason: fmt.Sprintf("%q: want poll or cdc", c.mode)}
	}
	if !isPostgresURL(db) {
		return &txbox.ConfigError{Field: flagField("mode"), Reason: "cdc needs a PostgreSQL database (--db postgres://...)"}
	}
	if c.slot == "" {
		return &txbox.ConfigError{Field: flagField("slot"), Reason: "required with --mode cdc"}
	}
	if err := cdc.ValidateSlot(c.slot); err != nil {
		return err
	}
	if wakeup != "poll" {
		return &txbox.ConfigError{Field: flagField("wakeup"), Reason: "--mode cdc reads the log: no wake-up to choose"}
	}
	return nil
}

func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// runCDC runs the relay in CDC mode with the settings of the polling relay
// that apply (publisher, topic, source, backoff, attempts, metrics).
//
// The start is the polling relay's: the database and the broker are waited
// for (or, with --fail-fast, not) before the CDC relay is created, with the
// same metrics, probes and log lines meanwhile. What differs comes after:
// wal_level and the publication are checked once the database answers, and
// fail rather than wait (no wait fixes them), and the CDC relay reads the
// log instead of claiming.
func runCDC(ctx context.Context, g *globals, cfg relay.Config, cf cdcFlags, s *postgres.Store, srv *obsServer) error {
	if err := cdc.Check(ctx, s); err != nil {
		return err
	}
	r, err := startRelay(ctx, srv, func() (*cdc.Reader, error) {
		lagWarn := cf.lagWarn
		if lagWarn == 0 {
			lagWarn = -1 // the library's "never"; its 0 is the default
		}
		return cdc.New(cdc.Config{Store: s, ConnString: g.db, Slot: cf.slot, Relay: cfg, BatchSize: cfg.BatchSize, LagWarnBytes: lagWarn})
	})
	if err != nil {
		return err
	}
	srv.warnOf(r.Relay(), cfg.LongTransactionWarn)
	g.log.Info("relay connected", "mode", modeCDC, "slot", cf.slot, "db", redact.URL(g.db), "broker", redact.URL(g.broker))
	// The relay's own observer logs the progress line (relay.Relay.Observe,
	// which the CDC relay runs); the counts at stop are this command's.
	err = r.Run(ctx)
	st := r.Relay().Stats()
	g.log.Info("relay stopped", "mode", modeCDC, "published", st.Published, "dead_marked", st.Dead, "retried", st.Retried, "deferred", st.Deferred)
	return err
}

func newCDC(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdc",
		Short: "Replication slots of relays in --mode cdc (PostgreSQL)",
	}
	cmd.AddCommand(newDropSlot(g))
	return cmd
}

func newDropSlot(g *globals) *cobra.Command {
	var cf confirmFlags
	cmd := &cobra.Command{
		Use:   "drop-slot NAME",
		Short: "Drop a replication slot left by a relay in --mode cdc, so it stops holding WAL (events it had not delivered are not delivered)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			slot := args[0]
			if err := cdc.ValidateSlot(slot); err != nil {
				return err
			}
			if !isPostgresURL(g.db) {
				return &txbox.ConfigError{Field: flagField("db"), Reason: "replication slots are PostgreSQL's (--db postgres://...)"}
			}
			ctx := cmd.Context()
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			s := st.(*postgres.Store)
			exists, err := cdc.SlotExists(ctx, s, slot)
			if err != nil {
				return err
			}
			if !exists {
				return &runtimeError{msg: fmt.Sprintf("replication slot %s does not exist", slot)}
			}
			// An active slot is refused as the drop itself would refuse it,
			// before the dry run or the prompt: a dry run answers what the
			// run would do, exit code included.
			active := &runtimeError{msg: fmt.Sprintf("replication slot %s is active: stop its relay first", slot)}
			var isActive bool
			if err := s.Pool().QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&isActive); err != nil {
				return err
			}
			if isActive {
				return active
			}
			what := fmt.Sprintf("drop replication slot %s", slot)
			if lags, err := cdc.SlotLags(ctx, s); err == nil {
				for _, l := range lags {
					if l.Slot == slot {
						what += fmt.Sprintf(" (it holds %d bytes of WAL not yet delivered)", l.Bytes)
					}
				}
			}
			// A slot is one object, but dropping it loses what it holds:
			// always ask (n = 2 makes the prompt or --yes required).
			ok, err := cf.proceed(cmd, what, 2)
			if err != nil || !ok {
				return err
			}
			if err := cdc.DropSlot(ctx, s, slot); err != nil {
				if errors.Is(err, cdc.ErrSlotActive) {
					return active
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dropped replication slot %s\n", slot)
			return nil
		},
	}
	cf.add(cmd.Flags())
	return cmd
}

// migrateCDC is `txbox migrate --cdc [--slot NAME]`.
func migrateCDC(ctx context.Context, cmd *cobra.Command, st any, slot string) error {
	s, ok := st.(*postgres.Store)
	if !ok {
		return &txbox.ConfigError{Field: flagField("cdc"), Reason: "CDC needs a PostgreSQL database (--db postgres://...)"}
	}
	if err := cdc.Migrate(ctx, s); err != nil {
		if errors.Is(err, cdc.ErrWALLevel) {
			return &runtimeError{msg: err.Error()}
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "publication %s ready\n", cdc.Publication(s))
	if slot == "" {
		return nil
	}
	created, err := cdc.CreateSlot(ctx, s, slot, true)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(cmd.OutOrStdout(), "replication slot %s created\n", slot)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "replication slot %s exists\n", slot)
	}
	return nil
}
