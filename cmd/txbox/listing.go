package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newFiltered is a command on the rows a filter selects (`dead replay`,
// `inbox replay`, the listings): filter reads its flags, which the caller
// adds, before anything is opened; then run does the work.
func newFiltered[F any](use, short string, filter func() (F, error), run func(cmd *cobra.Command, f F) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := filter()
			if err != nil {
				return err
			}
			return run(cmd, f)
		},
	}
}

// newListing is a command that lists (`dead list`, `inbox list`, `stats`):
// a filtered command with the output flags, which are read before anything
// is opened too.
func newListing[F any](use, short string, filter func() (F, error), list func(cmd *cobra.Command, f F, asJSON bool) error) *cobra.Command {
	var lo outputFlags
	cmd := newFiltered(use, short, filter, func(cmd *cobra.Command, f F) error {
		asJSON, err := lo.asJSON()
		if err != nil {
			return err
		}
		return list(cmd, f, asJSON)
	})
	lo.add(cmd.Flags())
	return cmd
}

// noFilter is the filter of a listing that has none.
func noFilter() (struct{}, error) { return struct{}{}, nil }

// printTable writes a listing as JSON (v) or as a table for a terminal: the
// header, then one tab-separated line for each of rows, which line writes.
func printTable[R any](w io.Writer, asJSON bool, v any, header string, rows []R, line func(io.Writer, R)) error {
	if asJSON {
		return json.NewEncoder(w).Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line(tw, r)
	}
	return tw.Flush()
}
