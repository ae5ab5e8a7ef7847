package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// A value that looks like a placeholder is routed literally, not expanded
// again: a producer cannot steer its event to another subject that way.
func TestTopicRenderInsertsValuesLiterally(t *testing.T) {
	e := txbox.Event{AggregateType: "{event_type}", Type: "{aggregate_type}"}
	if got := broker.Topic("x.{aggregate_type}.{event_type}").Render(e); got != "x.{event_type}.{aggregate_type}" {
		t.Fatalf("rendered %q", got)
	}
}

// FuzzTopicRender: Validate never panics and its errors are config errors
// naming --topic; Render of a valid template inserts each value exactly
// where its placeholder was and leaves everything else as written.
func FuzzTopicRender(f *testing.F) {
	f.Add(broker.DefaultTopic, "Order", "OrderCreated")
	f.Add("static.subject", "", "")
	f.Add("{aggregate_type}{event_type}{aggregate_type}", "{event_type}", "{aggregate_type}")
	f.Add("x.{aggregate}.{event_type", "A", "T")
	f.Add("{{aggregate_type}}", "}", "{")
	f.Add("", "A", "T")
	f.Fuzz(func(t *testing.T, tpl, aggType, evType string) {
		topic := broker.Topic(tpl)
		if err := topic.Validate(); err != nil {
			var ce *txbox.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(ce.Field, "--topic") || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error %q is not a one-line config error naming --topic", err)
			}
			return
		}
		got := topic.Render(txbox.Event{AggregateType: aggType, Type: evType})
		// Reference: split the template at its placeholders, left to right.
		var want strings.Builder
		rest := tpl
		for rest != "" {
			switch {
			case strings.HasPrefix(rest, "{aggregate_type}"):
				want.WriteString(aggType)
				rest = rest[len("{aggregate_type}"):]
			case strings.HasPrefix(rest, "{event_type}"):
				want.WriteString(evType)
				rest = rest[len("{event_type}"):]
			default:
				want.WriteByte(rest[0])
				rest = rest[1:]
			}
		}
		if got != want.String() {
			t.Fatalf("Render(%q, %q, %q) = %q, want %q", tpl, aggType, evType, got, want.String())
		}
		if !strings.ContainsAny(aggType+evType, "{}") && strings.ContainsAny(got, "{}") {
			t.Fatalf("a valid template left a brace in %q", got)
		}
	})
}
