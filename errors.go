package txbox

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidEvent: the envelope is missing a field or holds bad data.
	ErrInvalidEvent = errors.New("txbox: invalid event")

	// ErrPermanent marks a failure that retrying cannot fix (unroutable
	// destination, payload over the broker's limit, undecodable row). The
	// relay sends such a row to DEAD at once instead of spending its attempts.
	ErrPermanent = errors.New("txbox: permanent failure")

	// ErrBrokerUnavailable: the broker could not be reached or did not
	// confirm in time. Always retryable.
	ErrBrokerUnavailable = errors.New("txbox: broker unavailable")

	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("txbox: not found")
)

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds while the
// original error stays reachable with errors.Is/As.
func Permanent(err error) error {
	if err == nil || errors.Is(err, ErrPermanent) {
		return err
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() []error      { return []error{e.err, ErrPermanent} }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Unavailable wraps err so that errors.Is(err, ErrBrokerUnavailable) holds
// while the original error stays reachable with errors.Is/As. Broker
// adapters return it for every failure that a later attempt may not meet
// (connection lost, no confirm in time, broker shutting down); the relay
// retries such a message without spending its attempts. Unlike Permanent the
// message says so, "txbox: broker unavailable: <err>", because an operator
// reading a bare "EOF" in a log cannot tell it will be retried.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrBrokerUnavailable) {
		return err
	}
	return unavailableError{err}
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string        { return ErrBrokerUnavailable.Error() + ": " + e.err.Error() }
func (e unavailableError) Unwrap() []error      { return []error{e.err, ErrBrokerUnavailable} }
func (e unavailableError) Is(target error) bool { return target == ErrBrokerUnavailable }

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
