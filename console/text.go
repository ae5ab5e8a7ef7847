package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	secrets "github.com/txbox/txbox/internal/redact"
)

// controlPictures makes producer-written text safe to look at: C0 controls
// and DEL become their Unicode control pictures (␀ ␛ ␊ ...), C1 controls and
// the bidirectional overrides that could reorder what an operator reads
// become <U+XXXX>. html/template then escapes what is left.
func controlPictures(s string) string { return pictures(s, false) }

// blockText is controlPictures for <pre> blocks: line feeds and tabs stay.
func blockText(s string) string { return pictures(s, true) }

func pictures(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if needsPicture(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		case needsPicture(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsPicture(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0xfeff
}

// redact hides passwords in text the console shows: error messages may
// quote the URL a relay or consumer failed to reach. internal/redact is the
// one place that knows where a secret may stand in a connection string, so
// the console hides what the CLI and the adapters hide.
func redact(s string) string { return secrets.Text(s) }

// prettyJSON indents valid JSON; anything else is returned as it is.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if json.Valid(b) && json.Indent(&out, b, "", "  ") == nil {
		return out.String()
	}
	return string(b)
}
