package txbox

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidEvent: the envelope is missing a field or holds bad data.
	ErrInvalidEvent = errors.New("txbox: invalid event")

	// ErrPermanent marks a failure of the event itself that retrying cannot
	// fix (unroutable destination, payload over the broker's limit,
	// undecodable row). The relay sends such a row to DEAD at once instead
	// of spending its attempts.
	ErrPermanent = errors.New("txbox: permanent failure")

	// ErrBrokerUnavailable marks a failure of the way out, not of the event:
	// the broker could not be reached, lost the connection, did not confirm
	// in time, or refused for a reason of its own state (no stream for the
	// subject, not authorised, stream or disk full). The relay spends none
	// of the event's attempts on it and never makes it DEAD for it: it
	// pauses, probes, and delivers the event, in its aggregate's order,
	// once the broker takes it again, however long that is.
	ErrBrokerUnavailable = errors.New("txbox: broker unavailable")

	// ErrDatabaseUnavailable is ErrBrokerUnavailable's twin for a database:
	// it could not be reached, lost the connection, is read-only, failing
	// over or shutting down. The inbox consumer spends none of an event's
	// attempts on it (a handler whose database is down does not park the
	// event); the relay's claims and marks wait for it.
	ErrDatabaseUnavailable = errors.New("txbox: database unavailable")

	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("txbox: not found")
)

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds while the
// original error stays reachable with errors.Is/As.
func Permanent(err error) error { return mark(err, ErrPermanent, false) }

// Unavailable wraps err so that errors.Is(err, ErrBrokerUnavailable) holds
// while the original error stays reachable with errors.Is/As. Broker
// adapters return it for every failure of the way out (connection lost, no
// confirm in time, broker shutting down, no stream for the subject, not
// authorised, stream full); the relay retries such a message without
// spending its attempts. Unlike Permanent the message says so, "txbox:
// broker unavailable: <err>", because an operator reading a bare "EOF" in
// a log cannot tell it will be retried.
func Unavailable(err error) error {
	return mark(err, ErrBrokerUnavailable, true)
}

// DatabaseUnavailable wraps err so that errors.Is(err,
// ErrDatabaseUnavailable) holds, as Unavailable does for a broker. A store
// returns it for a database that cannot be reached or written; a handler
// may return it for a database of its own.
func DatabaseUnavailable(err error) error {
	return mark(err, ErrDatabaseUnavailable, true)
}

// IsOutage reports whether err is a failure of the way out (the broker or
// a database unavailable) rather than of the event: one that must spend
// none of the event's attempts.
func IsOutage(err error) bool {
	return errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrDatabaseUnavailable)
}

// mark wraps err so that errors.Is matches kind while err stays reachable;
// nil, or an err already of kind, is returned as it is. With prefix the
// message is "<kind>: <err>", else err's own.
func mark(err, kind error, prefix bool) error {
	if err == nil || errors.Is(err, kind) {
		return err
	}
	return markedError{err, kind, prefix}
}

type markedError struct {
	err, kind error
	prefix    bool
}

func (e markedError) Error() string {
	if e.prefix {
		return e.kind.Error() + ": " + e.err.Error()
	}
	return e.err.Error()
}

func (e markedError) Unwrap() []error      { return []error{e.err, e.kind} }
func (e markedError) Is(target error) bool { return target == e.kind }

// ConfigError names the setting that is wrong. Its message is one line meant
// for an operator: "txbox: config TXBOX_DB (--db): scheme "foo" not supported".
type ConfigError struct {
	Field  string // the setting, e.g. "BatchSize" or "--db"
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("txbox: config %s: %s", e.Field, e.Reason)
}

// ErrConfig is matched by every *ConfigError.
var ErrConfig = errors.New("txbox: invalid configuration")

func (e *ConfigError) Is(target error) bool { return target == ErrConfig }
