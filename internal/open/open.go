// Package open turns --db and --broker URLs into a store and a publisher.
// It is the only place that knows every adapter, so a library user who
// imports one adapter compiles only that one.
package open

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// StoreOptions are the store settings the binary exposes.
type StoreOptions struct {
	Tables     store.Tables
	DeleteSent bool
	Logger     *slog.Logger
}

const dbField = "--db (TXBOX_DB)"

// Store opens the database named by raw.
func Store(ctx context.Context, raw string, o StoreOptions) (store.Store, error) {
	if raw == "" {
		return nil, &txbox.ConfigError{Field: dbField, Reason: "missing; e.g. postgres://user@host/db, mysql://user@host/db or sqlite://path/to/file.db"}
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, &txbox.ConfigError{Field: dbField, Reason: fmt.Sprintf("%q is not a URL (scheme://...)", Redact(raw))}
	}
	if err := o.Tables.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	switch scheme {
	case "postgres", "postgresql":
		return postgres.Open(ctx, raw, postgres.Options{Tables: o.Tables, DeleteSent: o.DeleteSent, Logger: o.Logger})
	default:
		if open, ok := extraStores[scheme]; ok {
			return open(ctx, raw, o)
		}
		return nil, &txbox.ConfigError{Field: dbField, Reason: fmt.Sprintf("scheme %q not supported (postgres, mysql, sqlite)", scheme)}
	}
}

var extraStores = map[string]func(context.Context, string, StoreOptions) (store.Store, error){}

// Redact hides the secrets of a URL, a comma-separated list of URLs (NATS
// server lists) or a key=value DSN, for logs and errors: the password of
// every URL, a NATS token given as the user (nats://token@host), and the
// value of every password-like parameter (?password=..., sslpassword=...,
// password='...' in a DSN) become "xxxxx". Where a URL does not parse, or
// has an '@' that url.Parse does not read as userinfo, everything between
// "://" and the last '@' is hidden; in a string that is no URL at all,
// everything before the last '@' is.
func Redact(raw string) string {
	var b strings.Builder
	prev := 0
	locs := urlStartRE.FindAllStringIndex(raw, -1)
	for i, loc := range locs {
		end := len(raw)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		b.WriteString(raw[prev:loc[0]])
		b.WriteString(redactURL(raw[loc[0]:end]))
		prev = end
	}
	b.WriteString(raw[prev:])
	out := b.String()
	if len(locs) == 0 {
		// Not a URL: a driver DSN like user:password@tcp(host)/db keeps
		// its credentials before the last '@'.
		if at := strings.LastIndex(out, "@"); at >= 0 {
			out = "xxxxx" + out[at:]
		}
	}
	return secretParamRE.ReplaceAllString(out, "${1}${2}xxxxx")
}

var (
	// urlStartRE finds where each URL of a list starts.
	urlStartRE = regexp.MustCompile(`(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//`)
	// secretParamRE is a password-like key and its value, in a query
	// string or a key=value DSN.
	secretParamRE = regexp.MustCompile(`(?i)(^|[?&;\s,])((?:[a-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api_?key)|pass)\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^&\s,;#]*)`)
	// tokenSchemes read a lone user part as a secret token.
	tokenSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}
)

// redactURL redacts one URL of a list; separators after it are kept.
func redactURL(seg string) string {
	body := strings.TrimRight(seg, ", \t")
	tail := seg[len(body):]
	start := strings.Index(body, "//") + 2
	u, err := url.Parse(body)
	if err != nil || (u.User == nil && strings.Contains(body[start:], "@")) {
		if at := strings.LastIndex(body, "@"); at >= start {
			return body[:start] + "xxxxx" + body[at:] + tail
		}
		return seg
	}
	if u.User == nil {
		return seg
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else if tokenSchemes[strings.ToLower(u.Scheme)] {
		u.User = url.User("xxxxx")
	}
	return u.String() + tail
}
