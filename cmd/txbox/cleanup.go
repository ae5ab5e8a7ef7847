package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
)

func newCleanup(g *globals) *cobra.Command {
	var age time.Duration
	var batch int
	var ret inbox.Retention
	var maxAttempts int
	var backoffBase, backoffMax time.Duration
	var skipInbox bool
	var cf confirmFlags
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete SENT outbox rows and processed inbox rows past their retention, in bounded batches",
		Long: `Delete SENT outbox rows older than --older-than and processed inbox rows
older than --inbox-retention, a batch per statement.

The inbox retention is refused when it is below
  max(7 days, --broker-horizon + retry window + --manual-window)
because an inbox row is what stops a redelivered event from being applied
twice. The retry window follows from the consumers'
--inbox-max-attempts, --inbox-backoff-base and --inbox-backoff-max.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if age <= 0 {
				return &txbox.ConfigError{Field: "--older-than (TXBOX_OLDER_THAN)", Reason: "must be positive"}
			}
			if batch < 1 || batch > 100000 {
				return &txbox.ConfigError{Field: "--batch (TXBOX_BATCH)", Reason: "must be within 1..100000"}
			}
			ret.RetryWindow = inbox.Config{MaxAttempts: maxAttempts, BackoffBase: backoffBase, BackoffMax: backoffMax}.RetryWindow()
			if !skipInbox {
				if err := ret.Validate(); err != nil {
					return &txbox.ConfigError{Field: "--inbox-retention (TXBOX_INBOX_RETENTION)", Reason: err.Error()}
				}
			}
			s, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			admin, hasInbox := s.(store.InboxAdmin)
			hasInbox = hasInbox && !skipInbox
			if hasInbox {
				if err := checkInbox(cmd.Context(), s, admin); err != nil {
					return err
				}
			}
			if cf.counts() {
				what, total, err := cleanupCounts(cmd.Context(), s, age, ret.Keep, hasInbox)
				if err != nil {
					return err
				}
				if ok, err := cf.proceed(cmd, what, total); !ok {
					return err
				}
			}
			n, err := store.Cleanup(cmd.Context(), s, age, batch)
			fmt.Fprintf(cmd.OutOrStdout(), "outbox: deleted %d sent row(s) older than %s\n", n, age)
			if err != nil || !hasInbox {
				return err
			}
			n, err = store.InboxCleanup(cmd.Context(), admin, ret.Keep, batch)
			fmt.Fprintf(cmd.OutOrStdout(), "inbox: deleted %d processed row(s) older than %s\n", n, ret.Keep)
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&age, "older-than", 7*24*time.Hour, "age of SENT outbox rows to delete")
	f.IntVar(&batch, "batch", store.DefaultCleanupBatch, "rows per DELETE")
	f.DurationVar(&ret.Keep, "inbox-retention", inbox.DefaultRetentionFloor, "age of processed inbox rows to delete")
	f.DurationVar(&ret.BrokerHorizon, "broker-horizon", 0, "how long the broker may still redeliver a message (stream max age, TTL)")
	f.DurationVar(&ret.ManualWindow, "manual-window", inbox.DefaultManualWindow, "time operators get to repair a stuck flow")
	f.IntVar(&maxAttempts, "inbox-max-attempts", inbox.DefaultMaxAttempts, "the consumers' MaxAttempts")
	f.DurationVar(&backoffBase, "inbox-backoff-base", inbox.DefaultBackoffBase, "the consumers' BackoffBase")
	f.DurationVar(&backoffMax, "inbox-backoff-max", inbox.DefaultBackoffMax, "the consumers' BackoffMax")
	f.BoolVar(&skipInbox, "outbox-only", false, "leave the inbox alone")
	cf.add(f)
	return cmd
}

// cleanupCounts says what a cleanup would delete, exactly, for --dry-run and
// the confirmation.
func cleanupCounts(ctx context.Context, s store.Store, age, keep time.Duration, inbox bool) (string, int64, error) {
	c, ok := s.(store.Counter)
	if !ok {
		return fmt.Sprintf("delete sent outbox rows older than %s", age), -1, nil
	}
	n, err := c.CountCleanup(ctx, age)
	if err != nil {
		return "", 0, err
	}
	what := fmt.Sprintf("delete %d sent outbox row(s) older than %s", n, age)
	if !inbox {
		return what, n, nil
	}
	m, err := c.CountInboxCleanup(ctx, keep)
	if err != nil {
		return "", 0, err
	}
	return what + fmt.Sprintf(" and %d processed inbox row(s) older than %s", m, keep), n + m, nil
}
