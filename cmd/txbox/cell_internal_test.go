package main

import "testing"

func TestCellEscapesWhatATerminalWouldObey(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, \"quotes\" and é ✓": "plain text, \"quotes\" and é ✓",
		"\x1b[31mRED":                    `\x1b[31mRED`,
		"a\tb\nc\rd":                     `a\x09b\x0ac\x0dd`,
		"bad \xff\xfe utf8":              `bad \xff\xfe utf8`,
		"abc\u202edcba":                  `abc\u202edcba`,
		"iso\u2066late\u2069":            `iso\u2066late\u2069`,
		"c1 \u009b31m":                   `c1 \x9b31m`,
		"del\x7f":                        `del\x7f`,
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}
