package sqlstore

import (
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// FilterSQL turns f into a WHERE clause (without the keyword) and its
// arguments. ph renders the n-th placeholder (1-based) for the dialect, so
// every store builds filters the same way.
func FilterSQL(f store.Filter, ph func(n int) string, firstArg int) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.Replace(cond, "?", ph(firstArg+len(args)-1), 1))
	}
	if f.Status != "" {
		add("status = ?", string(f.Status))
	}
	if len(f.EventIDs) > 0 {
		ps := make([]string, len(f.EventIDs))
		for i, id := range f.EventIDs {
			args = append(args, id)
			ps[i] = ph(firstArg + len(args) - 1)
		}
		conds = append(conds, "event_id IN ("+strings.Join(ps, ", ")+")")
	}
	if f.AggregateType != "" {
		add("aggregate_type = ?", f.AggregateType)
	}
	if f.AggregateID != "" {
		add("aggregate_id = ?", f.AggregateID)
	}
	if f.EventType != "" {
		add("event_type = ?", f.EventType)
	}
	if !f.Since.IsZero() {
		add("created_at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		add("created_at < ?", f.Until.UTC())
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), args
}

// DeadOnly returns f restricted to DEAD rows; replay and purge never touch
// anything else, whatever the caller passed.
func DeadOnly(f store.Filter) store.Filter {
	f.Status = txbox.StatusDead
	return f
}

// Truncate cuts s to at most n bytes on a rune boundary, for last_error
// and error_message. The result is Text(s), cut: an error that quotes bad
// bytes (invalid UTF-8, NUL) must not make the statement recording it fail,
// or the row would never be marked.
func Truncate(s string, n int) string {
	s = Text(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// InboxFilterSQL is FilterSQL for the inbox table.
func InboxFilterSQL(f store.InboxFilter, ph func(n int) string, firstArg int) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.Replace(cond, "?", ph(firstArg+len(args)-1), 1))
	}
	if f.Consumer != "" {
		add("consumer_name = ?", f.Consumer)
	}
	if f.Status != "" {
		add("status = ?", string(f.Status))
	}
	if len(f.EventIDs) > 0 {
		ps := make([]string, len(f.EventIDs))
		for i, id := range f.EventIDs {
			args = append(args, id)
			ps[i] = ph(firstArg + len(args) - 1)
		}
		conds = append(conds, "event_id IN ("+strings.Join(ps, ", ")+")")
	}
	if !f.Since.IsZero() {
		add("received_at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		add("received_at < ?", f.Until.UTC())
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), args
}

// TimesAs replaces every time.Time among args (a filter's range) by conv's
// form of it, for a store that keeps timestamps as text or numbers.
func TimesAs(args []any, conv func(time.Time) any) []any {
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			args[i] = conv(t)
		}
	}
	return args
}
