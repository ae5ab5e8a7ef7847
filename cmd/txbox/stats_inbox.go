package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// inboxStatusOrder is the order `txbox stats` prints inbox statuses in.
var inboxStatusOrder = []txbox.Status{txbox.StatusProcessing, txbox.StatusProcessed, txbox.StatusRetry, txbox.StatusDead, txbox.StatusReplay, txbox.StatusSkipped}

// inboxCounts reads inbox rows per consumer and status; an empty map when
// the store keeps no inbox.
func inboxCounts(ctx context.Context, s store.Store) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	admin, ok := s.(store.InboxAdmin)
	if !ok {
		return out, nil
	}
	counts, err := admin.InboxCounts(ctx)
	if err != nil {
		if missingTable(err) {
			// A database that only produces events has no inbox table:
			// its stats are the outbox's alone.
			return out, nil
		}
		return nil, err
	}
	for consumer, byStatus := range counts {
		m := map[string]int64{}
		for _, st := range inboxStatusOrder {
			m[string(st)] = byStatus[st]
		}
		for st, n := range byStatus { // a status written by a newer version
			m[string(st)] = n
		}
		out[consumer] = m
	}
	return out, nil
}

// printInboxCounts prints one line per consumer: its counts per status.
func printInboxCounts(w io.Writer, counts map[string]map[string]int64) {
	if len(counts) == 0 {
		fmt.Fprintf(w, "%-12s -\n", "inbox")
		return
	}
	names := make([]string, 0, len(counts))
	for c := range counts {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		fmt.Fprintf(w, "inbox %q:", c)
		for _, st := range inboxStatusOrder {
			fmt.Fprintf(w, " %s=%d", st, counts[c][string(st)])
		}
		fmt.Fprintln(w)
	}
}
