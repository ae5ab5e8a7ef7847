package broker

import (
	"fmt"
	"strings"

	"github.com/txbox/txbox"
)

// DefaultTopic is the destination template when none is configured.
const DefaultTopic = "outbox.{aggregate_type}.{event_type}"

// Topic renders a destination template over {aggregate_type} and
// {event_type}. Whether the result is a valid destination is the broker's
// call, made when it publishes.
type Topic string

// Validate rejects an empty template and unknown placeholders.
func (t Topic) Validate() error {
	s := string(t)
	if s == "" {
		return &txbox.ConfigError{Field: "--topic (TXBOX_TOPIC)", Reason: "empty topic template"}
	}
	rest := strings.NewReplacer("{aggregate_type}", "", "{event_type}", "").Replace(s)
	if i := strings.IndexAny(rest, "{}"); i >= 0 {
		return &txbox.ConfigError{Field: "--topic (TXBOX_TOPIC)", Reason: fmt.Sprintf("%q: only {aggregate_type} and {event_type} may be used", s)}
	}
	return nil
}

// Render fills the placeholders in one pass: a value is inserted as it is,
// so an aggregate type that itself reads "{event_type}" is not expanded a
// second time.
func (t Topic) Render(e txbox.Event) string {
	s := string(t)
	if !strings.Contains(s, "{") {
		return s
	}
	// One left-to-right pass, so a value that itself reads like a
	// placeholder is never expanded again; no Replacer is built per event,
	// since every event the relay publishes renders its topic here.
	var b strings.Builder
	b.Grow(len(s) + len(e.AggregateType) + len(e.Type))
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "{aggregate_type}"):
			b.WriteString(e.AggregateType)
			s = s[len("{aggregate_type}"):]
		case strings.HasPrefix(s, "{event_type}"):
			b.WriteString(e.Type)
			s = s[len("{event_type}"):]
		default:
			b.WriteByte('{')
			s = s[1:]
		}
	}
}
