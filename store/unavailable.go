package store

import (
	"database/sql/driver"
	"errors"
	"reflect"
	"syscall"

	"github.com/txbox/txbox"
)

// OutageClassifier tells a database that is unavailable from a statement
// that failed for a reason of its own. A store's dialect implements it for
// its driver's errors, so the inbox, which must never import an adapter,
// can recognise an outage in any error it meets: its own statements' and
// those the handler returns from the store's transaction.
type OutageClassifier interface {
	// IsUnavailable reports whether err says the database could not be
	// reached, lost the connection, is read-only, shutting down or out of
	// connections or disk: a failure no retry of the same event can be
	// blamed for, and which ends without anyone touching the event. A
	// constraint violation, a deadlock, a lock wait timeout or a syntax
	// error is not one. When unsure, it says no: an error wrongly taken for
	// an outage is retried for ever instead of parking its event.
	IsUnavailable(err error) bool
}

// IsOutage reports whether err is an outage rather than a failure of the
// event: wrapped as one (txbox.IsOutage: a store's or a handler's
// txbox.DatabaseUnavailable, a broker's txbox.Unavailable), or recognised
// by d when d is an OutageClassifier (usually a store's dialect).
func IsOutage(d any, err error) bool {
	if err == nil {
		return false
	}
	if txbox.IsOutage(err) {
		return true
	}
	c, ok := d.(OutageClassifier)
	return ok && c.IsUnavailable(err)
}

// ConnectionLost reports whether err is a failure of the connection itself,
// whatever the driver: database/sql's driver.ErrBadConn, or a network error
// (a refused or reset connection, an unknown host, an i/o timeout on the
// socket). Stores' classifiers start with it; it is also what recognises a
// handler's failure on a database of another kind than the store's.
//
// A bare io.EOF or io.ErrUnexpectedEOF is not taken as one: a handler's
// JSON decoder returns them for a truncated payload, which is the event's
// fault. Nor is context.DeadlineExceeded, which has the methods of a
// net.Error but is the caller's own deadline: a slow statement the event
// may have caused.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	if netError(err) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// netError reports whether err or an error it wraps is a *net.OpError or a
// *net.DNSError. The types are matched by name, not imported, so the core
// packages (relay, inbox) compile no network code.
func netError(err error) bool {
	for err != nil {
		if t := reflect.TypeOf(err); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "net" {
			if n := t.Elem().Name(); n == "OpError" || n == "DNSError" {
				return true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if netError(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
