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
	w := where{ph: ph, first: firstArg}
	w.add(f.Status != "", "status = ?", string(f.Status))
	w.in("event_id", f.EventIDs)
	w.add(f.AggregateType != "", "aggregate_type = ?", f.AggregateType)
	w.add(f.AggregateID != "", "aggregate_id = ?", f.AggregateID)
	w.add(f.EventType != "", "event_type = ?", f.EventType)
	w.add(!f.Since.IsZero(), "created_at >= ?", f.Since.UTC())
	w.add(!f.Until.IsZero(), "created_at < ?", f.Until.UTC())
	// '!' as the escape character reads the same in all three dialects (a
	// backslash does not: MySQL unescapes it in literals).
	w.add(f.ErrorContains != "", "LOWER(last_error) LIKE LOWER(?) ESCAPE '!'", "%"+likeEscaper.Replace(f.ErrorContains)+"%")
	w.add(f.AfterID > 0, "id > ?", f.AfterID)
	w.add(f.BeforeID > 0, "id < ?", f.BeforeID)
	return w.sql()
}

var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// OrderBy is List's ORDER BY clause for f (without the keywords).
func OrderBy(f store.Filter) string {
	if f.Desc {
		return "id DESC"
	}
	return "id"
}

// InboxFilterSQL is FilterSQL for the inbox table.
func InboxFilterSQL(f store.InboxFilter, ph func(n int) string, firstArg int) (string, []any) {
	w := where{ph: ph, first: firstArg}
	w.add(f.Consumer != "", "consumer_name = ?", f.Consumer)
	w.add(f.Status != "", "status = ?", string(f.Status))
	w.in("event_id", f.EventIDs)
	w.add(!f.Since.IsZero(), "received_at >= ?", f.Since.UTC())
	w.add(!f.Until.IsZero(), "received_at < ?", f.Until.UTC())
	return w.sql()
}

// where collects the conditions of a filter and numbers their placeholders.
type where struct {
	ph    func(n int) string
	first int
	conds []string
	args  []any
}

func (w *where) next(v any) string {
	w.args = append(w.args, v)
	return w.ph(w.first + len(w.args) - 1)
}

// add appends cond, whose one "?" takes v, when on is set.
func (w *where) add(on bool, cond string, v any) {
	if on {
		w.conds = append(w.conds, strings.Replace(cond, "?", w.next(v), 1))
	}
}

// in appends "col IN (...)" for a non-empty vals.
func (w *where) in(col string, vals []string) {
	if len(vals) == 0 {
		return
	}
	ps := make([]string, len(vals))
	for i, v := range vals {
		ps[i] = w.next(v)
	}
	w.conds = append(w.conds, col+" IN ("+strings.Join(ps, ", ")+")")
}

func (w *where) sql() (string, []any) {
	if len(w.conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(w.conds, " AND "), w.args
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
