package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// filterFlags select dead rows by event id, aggregate, event type, last
// error and time: the console's filters.
type filterFlags struct {
	ids                    []string
	aggType, aggID, evType string
	errText                string
	since, until           string
	limit                  int
	all                    bool
}

func (ff *filterFlags) add(f *pflag.FlagSet, withAll bool) {
	f.StringSliceVar(&ff.ids, "event-id", nil, "event id (repeatable or comma separated)")
	f.StringVar(&ff.aggType, "aggregate-type", "", "aggregate type")
	f.StringVar(&ff.aggID, "aggregate-id", "", "aggregate id")
	f.StringVar(&ff.evType, "event-type", "", "event type")
	f.StringVar(&ff.errText, "error", "", "last error contains this text (case does not matter)")
	f.StringVar(&ff.since, "since", "", "created at or after (RFC 3339, or a duration ago like 2h)")
	f.StringVar(&ff.until, "until", "", "created before (RFC 3339, or a duration ago)")
	if withAll {
		f.BoolVar(&ff.all, "all", false, "match every dead row (required when no other filter is given)")
	} else {
		f.IntVar(&ff.limit, "limit", 100, "rows at most (the newest); when more match, a note on stderr says how many")
	}
}

func (ff *filterFlags) filter(needFilter bool) (store.Filter, error) {
	f := store.Filter{Status: txbox.StatusDead, EventIDs: ff.ids, AggregateType: ff.aggType, AggregateID: ff.aggID, EventType: ff.evType, ErrorContains: ff.errText, Limit: ff.limit}
	var err error
	if f.Since, err = parseWhen(ff.since, "--since"); err != nil {
		return f, err
	}
	if f.Until, err = parseWhen(ff.until, "--until"); err != nil {
		return f, err
	}
	empty := len(f.EventIDs) == 0 && f.AggregateType == "" && f.AggregateID == "" && f.EventType == "" && f.ErrorContains == "" && f.Since.IsZero() && f.Until.IsZero()
	if needFilter && empty && !ff.all {
		return f, &txbox.ConfigError{Field: "filter", Reason: "give --event-id, --aggregate-type, --aggregate-id, --event-type, --error, --since/--until, or --all"}
	}
	return f, nil
}

func parseWhen(s, field string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, &txbox.ConfigError{Field: field, Reason: fmt.Sprintf("%q is neither RFC 3339 nor a duration", s)}
}

func newDead(g *globals) *cobra.Command {
	dead := &cobra.Command{Use: "dead", Short: "Inspect, replay and purge dead-lettered outbox rows"}

	var lf filterFlags
	var lo outputFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead rows, newest first (as the console does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := lf.filter(false)
			if err != nil {
				return err
			}
			if f.Limit < 1 {
				return &txbox.ConfigError{Field: flagField("limit"), Reason: fmt.Sprintf("%d: want 1 or more", f.Limit)}
			}
			asJSON, err := lo.asJSON()
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(s store.Store) error { return listDead(cmd, s, f, asJSON) })
		},
	}
	lf.add(list.Flags(), false)
	lo.add(list.Flags())

	var showID string
	show := &cobra.Command{
		Use:   "show [EVENT_ID]",
		Short: "Show one dead row in full, payload included (the event id as argument or --event-id)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := showID
			switch {
			case len(args) == 1 && showID != "":
				return &usageError{msg: "give the event id once: as the argument or as --event-id"}
			case len(args) == 1:
				id = args[0]
			case id == "":
				return &usageError{msg: "give the event id: txbox dead show EVENT_ID, or --event-id EVENT_ID"}
			}
			return g.withStore(cmd.Context(), func(s store.Store) error {
				recs, err := s.List(cmd.Context(), store.Filter{Status: txbox.StatusDead, EventIDs: []string{id}, Limit: 1})
				if err != nil {
					return err
				}
				if len(recs) == 0 {
					return fmt.Errorf("dead event %s: %w", cell(id), txbox.ErrNotFound)
				}
				return printJSON(cmd.OutOrStdout(), rowsJSON(recs)[0])
			})
		},
	}
	show.Flags().StringVar(&showID, "event-id", "", "event id of the row to show")

	replay := newBulk(g, "replay", "Put matching dead rows back to PENDING (same event ids, fresh attempts)", "replayed", store.Store.Replay)
	purge := newBulk(g, "purge", "Delete matching dead rows", "purged", store.Store.Purge)
	dead.AddCommand(list, show, replay, purge)
	return dead
}

// listDead prints the dead rows f matches, newest first, at most f.Limit.
func listDead(cmd *cobra.Command, s store.Store, f store.Filter, asJSON bool) error {
	// Newest first: what an operator looks for is what died last, and the
	// console lists in the same order. One row more than the limit tells
	// whether rows were cut.
	limit := f.Limit
	f.Desc, f.Limit = true, limit+1
	recs, err := s.List(cmd.Context(), f)
	if err != nil {
		return err
	}
	cut := len(recs) > limit
	if cut {
		recs = recs[:limit]
	}
	w := cmd.OutOrStdout()
	if asJSON {
		err = json.NewEncoder(w).Encode(rowsJSON(recs))
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT_ID\tAGGREGATE\tTYPE\tATTEMPTS\tCREATED\tLAST_ERROR")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%d\t%s\t%s\n", cell(r.EventID), cell(r.AggregateType), cell(r.AggregateID), cell(r.EventType), r.RetryCount,
				r.CreatedAt.UTC().Format(time.RFC3339), cell(sqlstore.Truncate(r.LastError, 120)))
		}
		err = tw.Flush()
	}
	if err != nil || !cut {
		return err
	}
	// On stderr, so that the table or the JSON stays what it was.
	f.Desc, f.Limit = false, 0
	n, err := countRows(cmd.Context(), s, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "txbox: showing the newest %d of %s matching dead events; raise --limit or narrow the filter to see the rest\n", limit, countText(n))
	return nil
}

// newBulk is `dead replay` or `dead purge` (verb): do changes the dead rows
// the filter flags match, once the confirmation flags allow it.
func newBulk(g *globals, verb, short, done string, do func(store.Store, context.Context, store.Filter) (int64, error)) *cobra.Command {
	var ff filterFlags
	var cf confirmFlags
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter(true)
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(s store.Store) error { return bulk(cmd, s, f, &cf, verb, done, do) })
		},
	}
	ff.add(cmd.Flags(), true)
	cf.add(cmd.Flags())
	return cmd
}

func bulk(cmd *cobra.Command, s store.Store, f store.Filter, cf *confirmFlags, verb, done string, do func(store.Store, context.Context, store.Filter) (int64, error)) error {
	// A filter that matches nothing is a failure (exit 1), as `dead show`
	// of an id that is not there: a mistyped --event-type would otherwise
	// pass a script's check as a replay that worked. A dry run exits as
	// the run would.
	none := &runtimeError{msg: fmt.Sprintf("no dead event matches the filter: nothing to %s", verb)}
	if cf.counts() {
		n, err := countRows(cmd.Context(), s, sqlstore.DeadOnly(f))
		if err != nil {
			return err
		}
		if n == 0 {
			return none
		}
		if ok, err := cf.proceed(cmd, fmt.Sprintf("%s %s dead event(s)", verb, countText(n)), n); !ok {
			return err
		}
	}
	n, err := do(s, cmd.Context(), f)
	if err != nil {
		return err
	}
	if n == 0 {
		return none
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %d dead event(s)\n", done, n)
	return nil
}

type rowJSON struct {
	ID               int64           `json:"id"`
	EventID          string          `json:"event_id"`
	AggregateType    string          `json:"aggregate_type"`
	AggregateID      string          `json:"aggregate_id"`
	AggregateVersion int64           `json:"aggregate_version"`
	EventType        string          `json:"event_type"`
	Status           string          `json:"status"`
	RetryCount       int             `json:"retry_count"`
	CreatedAt        time.Time       `json:"created_at"`
	LastError        string          `json:"last_error"`
	Headers          json.RawMessage `json:"headers,omitempty"`
	Payload          json.RawMessage `json:"payload"`
}

func rowsJSON(recs []store.Record) []rowJSON {
	out := make([]rowJSON, len(recs))
	for i, r := range recs {
		out[i] = rowJSON{ID: r.ID, EventID: r.EventID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
			AggregateVersion: r.AggregateVersion, EventType: r.EventType, Status: string(r.Status), RetryCount: r.RetryCount,
			CreatedAt: r.CreatedAt, LastError: r.LastError, Headers: jsonOrString(r.Headers), Payload: jsonOrString(r.Payload)}
	}
	return out
}

// jsonOrString keeps valid JSON as is and quotes anything else, so a
// garbage payload is still shown rather than breaking the output.
func jsonOrString(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}
