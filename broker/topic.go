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
	return strings.NewReplacer("{aggregate_type}", e.AggregateType, "{event_type}", e.Type).Replace(s)
}
