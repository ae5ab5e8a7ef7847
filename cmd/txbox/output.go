package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
)

// outputFlags choose between the table for people and JSON for programs,
// the same way on every listing command.
type outputFlags struct {
	format string
	json   bool
}

func (o *outputFlags) add(f *pflag.FlagSet) {
	f.StringVarP(&o.format, "output", "o", "text", "text (a table; control characters escaped) or json")
	f.BoolVar(&o.json, "json", false, "print JSON (same as --output json)")
}

// asJSON reports whether to print JSON; a format it does not know is a
// usage error.
func (o *outputFlags) asJSON() (bool, error) {
	switch strings.ToLower(o.format) {
	case "json":
		return true, nil
	case "text", "table", "":
		return o.json, nil
	}
	return false, &txbox.ConfigError{Field: "--output (TXBOX_OUTPUT)", Reason: fmt.Sprintf("%q: want text or json", o.format)}
}

// printJSON writes v as indented JSON: one record or report for people and
// programs alike (`dead show`, `inbox show`, `stats --json`).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cell makes a value safe for a terminal table: anything a producer wrote
// may hold escape sequences (ESC [31m colours the operator's terminal,
// worse ones retitle or rewrite it), invalid UTF-8, or bidirectional
// overrides that reorder what is shown. Those are printed as \xNN or \uNNNN
// escapes; tabs and newlines too, so one row stays one line of the table.
func cell(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !printable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case printable(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// printable is unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space; it excludes control characters (C0, DEL, C1)
// and format characters such as the bidi overrides U+202A..U+202E and
// isolates U+2066..U+2069.
func printable(r rune) bool { return unicode.IsPrint(r) }
