package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/adminview"
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
	if f.Since, f.Until, err = parseSpan(ff.since, ff.until); err != nil {
		return f, err
	}
	empty := len(f.EventIDs) == 0 && f.AggregateType == "" && f.AggregateID == "" && f.EventType == "" && f.ErrorContains == "" && f.Since.IsZero() && f.Until.IsZero()
	if needFilter && empty && !ff.all {
		return f, &txbox.ConfigError{Field: "filter", Reason: "give --event-id, --aggregate-type, --aggregate-id, --event-type, --error, --since/--until, or --all"}
	}
	if !needFilter && f.Limit < 1 {
		return f, &txbox.ConfigError{Field: flagField("limit"), Reason: fmt.Sprintf("%d: want 1 or more", f.Limit)}
	}
	return f, nil
}

// parseSpan reads --since and --until.
func parseSpan(since, until string) (s, u time.Time, err error) {
	if s, err = parseWhen(since, "--since"); err != nil {
		return s, u, err
	}
	u, err = parseWhen(until, "--until")
	return s, u, err
}

func parseWhen(s, field string) (time.Time, error) {
	t, ok := adminview.ParseWhen(s)
	if !ok {
		return t, &txbox.ConfigError{Field: field, Reason: fmt.Sprintf("%q is neither RFC 3339 nor a duration", s)}
	}
	return t, nil
}

func newDead(g *globals) *cobra.Command {
	dead := &cobra.Command{Use: "dead", Short: "Inspect, replay and purge dead-lettered outbox rows"}

	var lf filterFlags
	list := newListing("list", "List dead rows, newest first (as the console does)", func() (store.Filter, error) { return lf.filter(false) },
		func(cmd *cobra.Command, f store.Filter, asJSON bool) error {
			return g.withStore(cmd.Context(), func(s store.Store) error { return listDead(cmd, s, f, asJSON) })
		})
	lf.add(list.Flags(), false)

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
	err = printTable(cmd.OutOrStdout(), asJSON, rowsJSON(recs), "EVENT_ID\tAGGREGATE\tTYPE\tATTEMPTS\tCREATED\tLAST_ERROR", recs, func(w io.Writer, r store.Record) {
		fmt.Fprintf(w, "%s\t%s/%s\t%s\t%d\t%s\t%s\n", cell(r.EventID), cell(r.AggregateType), cell(r.AggregateID), cell(r.EventType), r.RetryCount,
			r.CreatedAt.UTC().Format(time.RFC3339), cell(sqlstore.Truncate(r.LastError, 120)))
	})
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
	cmd := newFiltered(verb, short, func() (store.Filter, error) { return ff.filter(true) }, func(cmd *cobra.Command, f store.Filter) error {
		return g.withStore(cmd.Context(), func(s store.Store) error { return bulk(cmd, s, f, &cf, verb, done, do) })
	})
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
	adminview.Row
	CreatedAt time.Time       `json:"created_at"`
	LastError string          `json:"last_error"`
	Headers   json.RawMessage `json:"headers,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

func rowsJSON(recs []store.Record) []rowJSON {
	out := make([]rowJSON, len(recs))
	for i, r := range recs {
		out[i] = rowJSON{Row: adminview.RowOf(r), CreatedAt: r.CreatedAt, LastError: r.LastError, Headers: adminview.RawJSON(r.Headers), Payload: adminview.RawJSON(r.Payload)}
	}
	return out
}
