package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
)

func newCleanup(g *globals) *cobra.Command {
	var age time.Duration
	var batch int
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete SENT outbox rows older than --older-than, in bounded batches",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if age <= 0 {
				return &txbox.ConfigError{Field: "--older-than (TXBOX_OLDER_THAN)", Reason: "must be positive"}
			}
			if batch < 1 || batch > 100000 {
				return &txbox.ConfigError{Field: "--batch (TXBOX_BATCH)", Reason: "must be within 1..100000"}
			}
			s, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := s.Cleanup(cmd.Context(), age, batch)
			fmt.Fprintf(cmd.OutOrStdout(), "outbox: deleted %d sent row(s) older than %s\n", n, age)
			return err
		},
	}
	cmd.Flags().DurationVar(&age, "older-than", 7*24*time.Hour, "age of SENT rows to delete")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per DELETE")
	return cmd
}
