package natsbroker

import (
	"fmt"
	"strings"
)

// ValidateStreamName reports why name cannot name a JetStream stream: the
// server refuses whitespace, '.', '*', '>' and path separators. Checked
// before connecting, so a bad name is a configuration error, not a
// "broker unavailable" retried for ever.
func ValidateStreamName(name string) error {
	if name == "" {
		return fmt.Errorf("empty stream name")
	}
	if len(name) > 255 {
		return fmt.Errorf("stream name %q is longer than 255 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("stream name %q has whitespace or a control character at byte %d", name, i)
		case strings.IndexByte(".*>/\\", c) >= 0:
			return fmt.Errorf("stream name %q has %q, which stream names may not contain", name, c)
		}
	}
	return nil
}

// SubjectsFor returns the stream subjects that capture every subject a
// topic template renders to: its fixed leading tokens followed by ">"
// ("outbox.{aggregate_type}.{event_type}" gives "outbox.>"), or the
// template itself when it has no placeholder. A template that starts with
// a placeholder has no such subject short of ">", which would capture
// everything: the caller must name the subjects.
func SubjectsFor(template string) ([]string, error) {
	if !strings.Contains(template, "{") {
		return []string{template}, nil
	}
	var fixed []string
	for _, tok := range strings.Split(template, ".") {
		if strings.Contains(tok, "{") {
			break
		}
		fixed = append(fixed, tok)
	}
	if len(fixed) == 0 {
		return nil, fmt.Errorf("topic %q starts with a placeholder: no stream subject short of \">\" captures it", template)
	}
	return []string{strings.Join(fixed, ".") + ".>"}, nil
}

// subjectMatches reports whether the stream subject pattern (which may use
// the wildcards '*' for one token and '>' for the rest) captures subject.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// captures reports whether one of subjects captures subject.
func captures(subjects []string, subject string) bool {
	for _, p := range subjects {
		if subjectMatches(p, subject) {
			return true
		}
	}
	return false
}
