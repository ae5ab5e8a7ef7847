package natsbroker

import (
	"fmt"
	"strings"
)

// ValidateSubject reports why subject cannot be published to: empty,
// whitespace or control characters, wildcards ('*', '>'), or an empty token
// (leading, trailing or doubled dot). The relay checks rendered topics with
// it before sending, so a bad template fails at the row with a clear reason
// instead of as a protocol error on the connection.
func ValidateSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("empty subject")
	}
	for i := 0; i < len(subject); i++ {
		switch c := subject[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("subject %q has whitespace or a control character at byte %d", subject, i)
		case c == '*' || c == '>':
			return fmt.Errorf("subject %q has wildcard %q, which only subscriptions may use", subject, c)
		}
	}
	if strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, "..") {
		return fmt.Errorf("subject %q has an empty token (leading, trailing or doubled '.')", subject)
	}
	return nil
}
