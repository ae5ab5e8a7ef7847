package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
)

var statusOrder = []txbox.Status{txbox.StatusPending, txbox.StatusProcessing, txbox.StatusRetry, txbox.StatusSent, txbox.StatusDead}

// statsJSON is the stable shape of `txbox stats --json`.
type statsJSON struct {
	Counts           map[string]int64 `json:"counts"`
	Backlog          int64            `json:"backlog"`
	Dead             int64            `json:"dead"`
	OldestPendingAt  *time.Time       `json:"oldest_pending_at"`
	OldestPendingAge float64          `json:"oldest_pending_age_seconds"`
	// Inbox counts inbox rows per consumer name and status.
	Inbox map[string]map[string]int64 `json:"inbox"`
}

func newStats(g *globals) *cobra.Command {
	var lo outputFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Outbox counts per status, backlog, oldest pending age and dead count; inbox counts per consumer and status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := lo.asJSON()
			if err != nil {
				return err
			}
			s, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			st, err := s.Stats(cmd.Context())
			if err != nil {
				return err
			}
			out := statsJSON{Counts: map[string]int64{}, Dead: st.Dead, OldestPendingAt: st.OldestPending, OldestPendingAge: st.OldestAge.Seconds()}
			for _, k := range statusOrder {
				out.Counts[string(k)] = st.Counts[k]
			}
			out.Backlog = st.Counts[txbox.StatusPending] + st.Counts[txbox.StatusRetry] + st.Counts[txbox.StatusProcessing]
			if out.Inbox, err = inboxCounts(cmd.Context(), s); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			for _, k := range statusOrder {
				fmt.Fprintf(w, "%-12s %d\n", k, st.Counts[k])
			}
			fmt.Fprintf(w, "%-12s %d\n", "backlog", out.Backlog)
			if st.OldestPending != nil {
				fmt.Fprintf(w, "%-12s %s (since %s)\n", "oldest", st.OldestAge.Round(time.Millisecond), st.OldestPending.UTC().Format(time.RFC3339))
			} else {
				fmt.Fprintf(w, "%-12s -\n", "oldest")
			}
			printInboxCounts(w, out.Inbox)
			return nil
		},
	}
	lo.add(cmd.Flags())
	return cmd
}
