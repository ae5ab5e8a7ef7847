// Package defaults fills the fields of an adapter's options that the caller
// left zero. Every adapter's Options and SubscriberOptions have one
// withDefaults method built from these, so that zero means "the default"
// the same way everywhere.
package defaults

import "cmp"

// Or is v, or def when v is the zero value of its type.
func Or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Positive is v, or def when v is zero or negative: for timeouts and
// limits where a negative value has no meaning of its own.
func Positive[T cmp.Ordered](v, def T) T {
	var zero T
	if v <= zero {
		return def
	}
	return v
}
