package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/txbox/txbox"
)

// inboxStatuses are the values of the inbox's status column.
var inboxStatuses = []txbox.Status{txbox.StatusDead, txbox.StatusRetry, txbox.StatusReplay, txbox.StatusProcessing, txbox.StatusProcessed, txbox.StatusSkipped}

// parseStatus reads a --status value in any case; "" or "all" is every
// status. Anything else is a usage error listing the valid values, rather
// than a filter that silently matches nothing.
func parseStatus(flag, v string, valid []txbox.Status) (txbox.Status, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.EqualFold(v, "all") {
		return "", nil
	}
	s := txbox.Status(strings.ToUpper(v))
	if slices.Contains(valid, s) {
		return s, nil
	}
	names := make([]string, len(valid))
	for i, st := range valid {
		names[i] = string(st)
	}
	return "", &txbox.ConfigError{Field: flag, Reason: fmt.Sprintf("%q is not a status; want one of %s, or all (case does not matter)", v, strings.Join(names, ", "))}
}

// consumerNames lists the consumers that have inbox rows, sorted.
func consumerNames(counts map[string]map[txbox.Status]int64) []string {
	names := make([]string, 0, len(counts))
	for c := range counts {
		names = append(names, c)
	}
	sort.Strings(names)
	return names
}
