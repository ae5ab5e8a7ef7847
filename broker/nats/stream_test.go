package natsbroker_test

import (
	"testing"

	natsbroker "github.com/txbox/txbox/broker/nats"
)

func TestStreamSubjectRules(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"outbox.>", "outbox.Order.Placed", true},
		{"outbox.>", "outbox", false},
		{"outbox.*.Placed", "outbox.Order.Placed", true},
		{"outbox.*", "outbox.Order.Placed", false},
		{"probe.fixed", "probe.fixed", true},
		{"probe.fixed", "probe.fixed.more", false},
		{">", "anything.at.all", true},
	} {
		if got := natsbroker.SubjectMatches(c.pattern, c.subject); got != c.want {
			t.Errorf("subjectMatches(%q, %q) = %v", c.pattern, c.subject, got)
		}
	}
	for tpl, want := range map[string]string{
		"outbox.{aggregate_type}.{event_type}": "outbox.>",
		"a.b.{event_type}.c":                   "a.b.>",
		"probe.fixed":                          "probe.fixed",
		"x.pre{event_type}":                    "x.>",
	} {
		if got, err := natsbroker.SubjectsFor(tpl); err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("SubjectsFor(%q) = %v, %v; want %s", tpl, got, err, want)
		}
	}
	if _, err := natsbroker.SubjectsFor("{aggregate_type}.x"); err == nil {
		t.Error("a template starting with a placeholder got subjects")
	}
	for name, ok := range map[string]bool{"TXBOX": true, "orders-v2_1": true, "": false, "PROBE.BAD": false, "a b": false, "a*": false, "a>": false, "a/b": false} {
		if err := natsbroker.ValidateStreamName(name); (err == nil) != ok {
			t.Errorf("ValidateStreamName(%q) = %v", name, err)
		}
	}
}
