package mqttbroker

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxString is the longest MQTT UTF-8 string: a two-byte length prefix.
const maxString = 65535

// ValidateTopic reports why topic cannot be published to: empty, longer than
// 65535 bytes, not UTF-8 or holding characters MQTT strings may not carry
// (see checkString), a wildcard ('+', '#'), or a leading '$' (reserved for
// the broker, as in $SYS). The publisher checks every rendered topic with it
// before sending, so a bad template fails at the row with a clear reason
// instead of as a protocol error that costs the connection.
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("empty topic")
	}
	if err := checkString(topic); err != nil {
		return fmt.Errorf("topic %q: %w", short(topic), err)
	}
	if i := strings.IndexAny(topic, "+#"); i >= 0 {
		return fmt.Errorf("topic %q has wildcard %q, which only subscriptions may use", short(topic), topic[i])
	}
	if topic[0] == '$' {
		return fmt.Errorf("topic %q starts with '$', which is reserved for the broker", short(topic))
	}
	return nil
}

// ValidateFilter reports why filter cannot be subscribed to: the rules of
// ValidateTopic, except that '+' may stand for one whole level and '#' for
// the last, whole level, and '$' may start it ("$share/group/filter").
func ValidateFilter(filter string) error {
	if filter == "" {
		return fmt.Errorf("empty topic filter")
	}
	if err := checkString(filter); err != nil {
		return fmt.Errorf("topic filter %q: %w", short(filter), err)
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		switch {
		case strings.Contains(l, "#") && (l != "#" || i != len(levels)-1):
			return fmt.Errorf("topic filter %q: '#' must be the whole last level", filter)
		case strings.Contains(l, "+") && l != "+":
			return fmt.Errorf("topic filter %q: '+' must be a whole level", filter)
		}
	}
	return nil
}

// checkString refuses what an MQTT 5 UTF-8 string may not hold [MQTT-1.5.4]:
// invalid UTF-8, U+0000, more than 65535 bytes, and what brokers such as
// Mosquitto refuse too by closing the connection: control characters
// (U+0001-U+001F, U+007F-U+009F) and non-characters.
func checkString(s string) error {
	if len(s) > maxString {
		return fmt.Errorf("%d bytes, over MQTT's limit of %d", len(s), maxString)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Errorf("NUL character at byte %d", i)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("control character %U at byte %d", r, i)
		case (r >= 0xfdd0 && r <= 0xfdef) || r&0xfffe == 0xfffe:
			return fmt.Errorf("non-character %U at byte %d", r, i)
		}
	}
	return nil
}

// short cuts s for an error message.
func short(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:200] + "..."
}
