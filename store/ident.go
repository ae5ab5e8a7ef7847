package store

import (
	"fmt"
	"regexp"

	"github.com/txbox/txbox"
)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Tables names the tables txbox owns. Names are validated identifiers, never
// quoted user input, so configuration cannot carry SQL.
type Tables struct {
	Schema string // optional; PostgreSQL schema or MySQL database
	Outbox string // default "outbox_event"
	Inbox  string // default "inbox_event"
}

// WithDefaults fills empty names.
func (t Tables) WithDefaults() Tables {
	if t.Outbox == "" {
		t.Outbox = "outbox_event"
	}
	if t.Inbox == "" {
		t.Inbox = "inbox_event"
	}
	return t
}

// Validate rejects any name that is not a plain identifier.
func (t Tables) Validate() error {
	for _, f := range []struct{ field, v string }{{"Tables.Schema", t.Schema}, {"Tables.Outbox", t.Outbox}, {"Tables.Inbox", t.Inbox}} {
		if f.v == "" && f.field == "Tables.Schema" {
			continue
		}
		if !identRE.MatchString(f.v) {
			return &txbox.ConfigError{Field: f.field, Reason: fmt.Sprintf("%q is not a plain SQL identifier (letters, digits, _; at most 63)", f.v)}
		}
	}
	return nil
}

// Qualified returns schema.name or name.
func (t Tables) Qualified(name string) string {
	if t.Schema == "" {
		return name
	}
	return t.Schema + "." + name
}
