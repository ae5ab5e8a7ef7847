package sqlstore

import "strings"

// Text returns s as text every store keeps: invalid UTF-8 becomes U+FFFD
// and NUL bytes are dropped.
func Text(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}
