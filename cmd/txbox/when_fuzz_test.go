package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
)

// FuzzParseWhen: --since/--until never panic; "" is no bound; an RFC 3339
// time is taken as written; a duration is that long ago; anything else is a
// one-line *txbox.ConfigError naming the flag.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"", "2h", "90m", "2025-01-02T03:04:05Z", "2025-01-02T03:04:05.123+02:00", "-1h", "yesterday",
		"9999999999h", "1e9h", "2025-13-01T00:00:00Z", "0s", "\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		before := time.Now()
		got, err := parseWhen(s, "--since")
		after := time.Now()
		if err != nil {
			var ce *txbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != "--since" || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("parseWhen(%q): error %q is not a one-line config error naming --since", s, err)
			}
			return
		}
		if s == "" {
			if !got.IsZero() {
				t.Fatalf("empty flag gave %v", got)
			}
			return
		}
		if want, perr := time.Parse(time.RFC3339, s); perr == nil {
			if !got.Equal(want) {
				t.Fatalf("parseWhen(%q) = %v, want %v", s, got, want)
			}
			return
		}
		d, perr := time.ParseDuration(s)
		if perr != nil || d < 0 {
			t.Fatalf("parseWhen(%q) accepted neither a time nor a duration: %v", s, got)
		}
		if got.Before(before.Add(-d)) || got.After(after.Add(-d)) {
			t.Fatalf("parseWhen(%q) = %v, want %v ago", s, got, d)
		}
	})
}
