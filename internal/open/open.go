// Package open turns --db and --broker URLs into a store and a publisher.
// It is the only place that knows every adapter, so a library user who
// imports one adapter compiles only that one.
package open

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// StoreOptions are the store settings the binary exposes.
type StoreOptions struct {
	Tables     store.Tables
	DeleteSent bool
	NoSplit    bool // PostgreSQL: postgres.Options.NoSplit
	Logger     *slog.Logger
	// Existing refuses a SQLite file that does not exist instead of
	// creating it: only a command that creates the tables should make the
	// file, or a mistyped path leaves an empty database behind it.
	Existing bool
}

const dbField = "--db (TXBOX_DB)"

// Store opens the database named by raw.
func Store(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
	if raw == "" {
		return nil, &txbox.ConfigError{Field: dbField, Reason: "missing; e.g. postgres://user@host/db, mysql://user@host/db or sqlite://path/to/file.db"}
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, noScheme(raw)
	}
	if err := o.Tables.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	switch scheme {
	case "postgres", "postgresql":
		return postgres.Open(ctx, raw, postgres.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, NoSplit: o.NoSplit, Logger: o.Logger})
	default:
		if open, ok := extraStores[scheme]; ok {
			return open(ctx, raw, o)
		}
		return nil, &txbox.ConfigError{Field: dbField, Reason: fmt.Sprintf("scheme %q not supported (postgres, mysql, sqlite)", scheme)}
	}
}

var extraStores = map[string]func(context.Context, string, StoreOptions) (store.Store, error){}

// noScheme explains a --db without a scheme. It shows the value as a
// postgres:// URL would be shown: a lone user name (root@host/db) is a
// user name, not hidden as if it were a password, while a user:password
// and password parameters are hidden. A value shaped like user@host/db
// gets the URL to write instead.
func noScheme(raw string) error {
	const as = "postgres://"
	shown := strings.TrimPrefix(redact.URL(as+raw), as)
	reason := fmt.Sprintf("%q has no scheme: want postgres://, mysql:// or sqlite:// in front", shown)
	if !strings.ContainsAny(raw, " =()") {
		reason += fmt.Sprintf(" (e.g. postgres://%s or mysql://%s)", shown, shown)
	}
	return &txbox.ConfigError{Field: dbField, Reason: reason}
}
