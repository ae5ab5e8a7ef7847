package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

type inboxFlags struct {
	consumer     string
	status       string
	ids          []string
	since, until string
	limit        int
	all          bool
}

func (f *inboxFlags) filter(needFilter bool) (store.InboxFilter, error) {
	out := store.InboxFilter{Consumer: f.consumer, EventIDs: f.ids, Limit: f.limit}
	var err error
	if out.Status, err = parseStatus("--status (TXBOX_STATUS)", f.status, inboxStatuses); err != nil {
		return out, err
	}
	if out.Since, out.Until, err = parseSpan(f.since, f.until); err != nil {
		return out, err
	}
	if needFilter && !f.all && len(f.ids) == 0 && out.Since.IsZero() && out.Until.IsZero() {
		return out, &txbox.ConfigError{Field: "filter", Reason: "give --event-id, --since/--until, or --all"}
	}
	return out, nil
}

// withInbox is withStore for the inbox commands: do gets the store's inbox
// administration, once its tables are checked.
func withInbox(ctx context.Context, g *globals, do func(store.InboxAdmin) error) error {
	return g.withStore(ctx, func(s store.Store) error {
		admin, ok := s.(store.InboxAdmin)
		if !ok {
			return fmt.Errorf("this store has no inbox support")
		}
		if err := checkInbox(ctx, s, admin); err != nil {
			return err
		}
		return do(admin)
	})
}

func newInbox(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "inbox", Short: "Inspect and replay parked inbox events"}

	var lf inboxFlags
	list := newListing("list", "List inbox rows (default: parked ones)", func() (store.InboxFilter, error) { return lf.filter(false) },
		func(cmd *cobra.Command, f store.InboxFilter, asJSON bool) error {
			return withInbox(cmd.Context(), g, func(admin store.InboxAdmin) error {
				rows, err := admin.InboxList(cmd.Context(), f)
				if err != nil {
					return err
				}
				return printTable(cmd.OutOrStdout(), asJSON, inboxJSON(rows), "EVENT_ID\tCONSUMER\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED\tERROR", rows, func(w io.Writer, r store.InboxRow) {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cell(r.EventID), cell(r.ConsumerName), cell(r.EventType), r.Status, r.RetryCount,
						r.ReceivedAt.UTC().Format(time.RFC3339), cell(sqlstore.Truncate(r.ErrorMessage, 120)))
				})
			})
		})
	list.Flags().StringVar(&lf.consumer, "consumer", "", "consumer name")
	list.Flags().StringVar(&lf.status, "status", "DEAD", "status: DEAD, RETRY, REPLAY, PROCESSING, PROCESSED, SKIPPED (any case), or all")
	list.Flags().StringSliceVar(&lf.ids, "event-id", nil, "event id (repeatable)")
	list.Flags().StringVar(&lf.since, "since", "", "received at or after (RFC 3339 or a duration ago)")
	list.Flags().StringVar(&lf.until, "until", "", "received before (RFC 3339 or a duration ago)")
	list.Flags().IntVar(&lf.limit, "limit", 100, "rows at most")

	var consumer string
	show := &cobra.Command{
		Use:   "show EVENT_ID",
		Short: "Show inbox rows of one event, with the stored payload of unprocessed ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInbox(cmd.Context(), g, func(admin store.InboxAdmin) error {
				rows, err := admin.InboxList(cmd.Context(), store.InboxFilter{Consumer: consumer, EventIDs: args[:1]})
				if err != nil {
					return err
				}
				if len(rows) == 0 {
					return fmt.Errorf("inbox event %s: %w", args[0], txbox.ErrNotFound)
				}
				return printJSON(cmd.OutOrStdout(), inboxJSON(rows))
			})
		},
	}
	show.Flags().StringVar(&consumer, "consumer", "", "consumer name")

	var rf inboxFlags
	replay := newFiltered("replay", "Ask the running consumer to apply parked events again (same event ids, fresh attempts)",
		func() (store.InboxFilter, error) {
			if rf.consumer == "" {
				return store.InboxFilter{}, &txbox.ConfigError{Field: "--consumer", Reason: "required: replays run in that consumer"}
			}
			return rf.filter(true)
		},
		func(cmd *cobra.Command, f store.InboxFilter) error {
			return withInbox(cmd.Context(), g, func(admin store.InboxAdmin) error {
				n, err := admin.InboxReplay(cmd.Context(), f)
				if err != nil {
					return err
				}
				if n == 0 {
					if err := noSuchConsumer(cmd.Context(), admin, rf.consumer); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "replay requested for %d parked event(s); consumer %q applies them on its next replay check\n", n, rf.consumer)
				return nil
			})
		})
	replay.Flags().StringVar(&rf.consumer, "consumer", "", "consumer name (required)")
	replay.Flags().StringSliceVar(&rf.ids, "event-id", nil, "event id (repeatable)")
	replay.Flags().StringVar(&rf.since, "since", "", "received at or after")
	replay.Flags().StringVar(&rf.until, "until", "", "received before")
	replay.Flags().BoolVar(&rf.all, "all", false, "every parked event of the consumer")
	cmd.AddCommand(list, show, replay)
	return cmd
}

type inboxRowJSON struct {
	EventID  string `json:"event_id"`
	Consumer string `json:"consumer_name"`
	adminview.InboxState
	Aggregate string            `json:"aggregate,omitempty"`
	Version   int64             `json:"aggregate_version,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Payload   json.RawMessage   `json:"payload,omitempty"`
}

func inboxJSON(rows []store.InboxRow) []inboxRowJSON {
	out := make([]inboxRowJSON, len(rows))
	for i, r := range rows {
		out[i] = inboxRowJSON{EventID: r.EventID, Consumer: r.ConsumerName, InboxState: adminview.InboxStateOf(r),
			Version: r.Event.AggregateVersion, Headers: r.Event.Headers, Payload: adminview.RawJSON(r.Event.Payload)}
		if r.Event.AggregateType != "" {
			out[i].Aggregate = r.Event.AggregateType + "/" + r.Event.AggregateID
		}
	}
	return out
}

// noSuchConsumer explains a replay that found nothing because the consumer
// has no rows at all (a mistyped or differently cased name), naming the
// consumers that do: exit 1.
func noSuchConsumer(ctx context.Context, admin store.InboxAdmin, consumer string) error {
	counts, err := admin.InboxCounts(ctx)
	if err != nil {
		return err
	}
	if _, ok := counts[consumer]; ok {
		return nil
	}
	known := "none"
	if names := consumerNames(counts); len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return &runtimeError{msg: fmt.Sprintf("consumer %q has no inbox rows: nothing to replay (consumers with rows: %s)", consumer, known)}
}
