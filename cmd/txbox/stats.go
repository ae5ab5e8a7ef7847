package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// statsJSON is the stable shape of `txbox stats --json`.
type statsJSON struct {
	adminview.Outbox
	// Inbox counts inbox rows per consumer name and status.
	Inbox map[string]map[string]int64 `json:"inbox"`
	// CDCSlots is the lag of every replication slot a relay in --mode cdc
	// registered (PostgreSQL; absent elsewhere).
	CDCSlots []cdc.SlotLag `json:"cdc_slots,omitempty"`
	// Blocked is the rows held behind DEAD events (relay --dead-blocks;
	// absent for a store that cannot hold rows).
	Blocked *blockedJSON `json:"blocked,omitempty"`
}

// blockedJSON is store.Blocked in `txbox stats --json`.
type blockedJSON struct {
	Aggregates           int64   `json:"aggregates"`
	Rows                 int64   `json:"rows"`
	OldestHeldAgeSeconds float64 `json:"oldest_held_age_seconds"`
}

func newStats(g *globals) *cobra.Command {
	return newListing("stats", "Outbox counts per status, backlog, oldest pending age and dead count; inbox counts per consumer and status", noFilter,
		func(cmd *cobra.Command, _ struct{}, asJSON bool) error {
			return g.withStore(cmd.Context(), func(s store.Store) error { return printStats(cmd.Context(), cmd.OutOrStdout(), s, asJSON) })
		})
}

// printStats prints the outbox's counts, the inbox's per consumer and the
// CDC slots' lag, as a table or as statsJSON.
func printStats(ctx context.Context, w io.Writer, s store.Store, asJSON bool) error {
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	out := statsJSON{Outbox: adminview.OutboxOf(st)}
	if out.Inbox, err = inboxCounts(ctx, s); err != nil {
		return err
	}
	if ps, ok := s.(*postgres.Store); ok {
		if out.CDCSlots, err = cdc.SlotLags(ctx, ps); err != nil {
			return err
		}
	}
	if db, ok := s.(store.DeadBlocker); ok {
		b, err := db.Blocked(ctx)
		if err != nil {
			return err
		}
		out.Blocked = &blockedJSON{Aggregates: b.Aggregates, Rows: b.Rows, OldestHeldAgeSeconds: b.OldestAge.Seconds()}
	}
	if asJSON {
		return printJSON(w, out)
	}
	for _, k := range adminview.StatusOrder {
		fmt.Fprintf(w, "%-12s %d\n", k, st.Counts[k])
	}
	fmt.Fprintf(w, "%-12s %d\n", "backlog", out.Backlog)
	if st.OldestPending != nil {
		fmt.Fprintf(w, "%-12s %s (since %s)\n", "oldest", st.OldestAge.Round(time.Millisecond), st.OldestPending.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "%-12s -\n", "oldest")
	}
	if b := out.Blocked; b != nil {
		if b.Aggregates == 0 {
			fmt.Fprintf(w, "%-12s 0\n", "blocked")
		} else {
			fmt.Fprintf(w, "%-12s %d aggregates, %d rows held behind DEAD events (oldest %s): txbox dead list, then replay or purge\n", "blocked",
				b.Aggregates, b.Rows, (time.Duration(b.OldestHeldAgeSeconds * float64(time.Second))).Round(time.Second))
		}
	}
	printInboxCounts(w, out.Inbox)
	printSlots(w, out.CDCSlots)
	return nil
}

// printSlots lists the CDC relays' replication slots: a slot nobody reads
// holds WAL until it is dropped, so its lag is what to watch.
func printSlots(w io.Writer, slots []cdc.SlotLag) {
	if len(slots) == 0 {
		return
	}
	fmt.Fprintln(w, "cdc slots")
	for _, l := range slots {
		state := "inactive"
		switch {
		case !l.Exists:
			state = "missing"
		case l.Active:
			state = "active"
		}
		fmt.Fprintf(w, "  %-30s %-8s lag %d bytes, %.1f s\n", l.Slot, state, l.Bytes, l.Seconds)
	}
}
