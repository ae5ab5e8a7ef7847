package sqladmin

import (
	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// ReadsArchive reports whether List and Count read a store's archive of
// delivered rows for f: unless f asks for a status that is never archived.
func ReadsArchive(f store.Filter) bool {
	return f.Status == "" || f.Status == txbox.StatusSent
}

// Twice is args, twice over when both is set: the arguments of a filter
// that a statement applies to two tables, one after the other.
func Twice(args []any, both bool) []any {
	if !both {
		return args
	}
	return append(args[:len(args):len(args)], args...)
}

// DefaultListLimit is how many rows List returns when the filter sets no
// limit.
const DefaultListLimit = 100

// ListLimit is f's limit, or DefaultListLimit when it sets none.
func ListLimit(f store.Filter) int {
	if f.Limit <= 0 {
		return DefaultListLimit
	}
	return f.Limit
}
