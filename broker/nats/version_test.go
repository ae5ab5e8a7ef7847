package natsbroker_test

import (
	"testing"

	natsbroker "github.com/txbox/txbox/broker/nats"
)

// Which batch publish a server version has: fast-ingest from 2.14,
// atomic from 2.12; an unparsable version has neither.
func TestBatchPublishSupport(t *testing.T) {
	for _, tc := range []struct {
		version      string
		fast, atomic bool
	}{
		{"2.9.10", false, false},
		{"2.11.4", false, false},
		{"2.12.0", false, true},
		{"2.13.2", false, true},
		{"2.14.0", true, true},
		{"v2.15.2", true, true},
		{"3.0.0", true, true},
		{"", false, false},
		{"next", false, false},
	} {
		fast, atomic := natsbroker.BatchPublishSupport(tc.version)
		if fast != tc.fast || atomic != tc.atomic {
			t.Errorf("BatchPublishSupport(%q) = fast %v, atomic %v; want %v, %v", tc.version, fast, atomic, tc.fast, tc.atomic)
		}
	}
}
