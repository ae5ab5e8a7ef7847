package adminview

import "time"

// ParseWhen reads a filter's time bound: RFC 3339 (a fraction of a second allowed), or a
// non-negative duration ago ("2h"). "" is the zero time; ok is false when s
// is neither form, and the caller words the error for its own input.
func ParseWhen(s string) (t time.Time, ok bool) {
	if s == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), true
	}
	return time.Time{}, false
}
