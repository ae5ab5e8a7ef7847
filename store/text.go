package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/txbox/txbox"
)

// CheckText reports a field of e that not every store can keep as text:
// invalid UTF-8 (PostgreSQL and MySQL refuse it, SQLite keeps the bytes), or
// a NUL byte in a string field (PostgreSQL refuses it). Such an event can
// never be delivered or recorded everywhere, so the error wraps
// txbox.ErrInvalidEvent and txbox.ErrPermanent. The payload is JSON, which
// cannot hold a raw NUL, so only its encoding is checked.
func CheckText(e txbox.Event) error {
	bad := func(field, why string) error {
		return txbox.Permanent(fmt.Errorf("%w: %s %s", txbox.ErrInvalidEvent, field, why))
	}
	check := func(field, v string) error {
		if !utf8.ValidString(v) {
			return bad(field, "is not valid UTF-8")
		}
		if strings.IndexByte(v, 0) >= 0 {
			return bad(field, "has a NUL byte")
		}
		return nil
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", e.ID}, {"event type", e.Type}, {"aggregate type", e.AggregateType}, {"aggregate id", e.AggregateID},
	} {
		if err := check(f.name, f.v); err != nil {
			return err
		}
	}
	for k, v := range e.Headers {
		if err := check("header name", k); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("header %q", k), v); err != nil {
			return err
		}
	}
	if !utf8.Valid(e.Payload) {
		return bad("payload", "is not valid UTF-8")
	}
	return nil
}
