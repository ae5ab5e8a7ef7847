// Package defaults holds what every adapter's options default to and the
// helpers their withDefaults methods are built from, so that a zero field
// means "the default" the same way in every adapter.
package defaults

import (
	"cmp"
	"log/slog"
	"time"
)

// ConnectTimeout is every adapter's default Options.ConnectTimeout.
const ConnectTimeout = 5 * time.Second

// Positive is v, or def when v is zero or negative: for timeouts and
// limits where a negative value has no meaning of its own.
func Positive[T cmp.Ordered](v, def T) T {
	var zero T
	if v <= zero {
		return def
	}
	return v
}

// Client fills what every adapter gives its client: a name (def, the
// side's default such as "txbox-publisher", when empty), a logger
// (slog.Default()) and a connect timeout (ConnectTimeout, when not above
// zero).
func Client(name, def string, log *slog.Logger, connectTimeout time.Duration) (string, *slog.Logger, time.Duration) {
	return cmp.Or(name, def), cmp.Or(log, slog.Default()), Positive(connectTimeout, ConnectTimeout)
}
