package brokertest

import (
	"testing"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
)

// testNativeDedupe: publishing the same event id twice is confirmed both
// times and stored once.
func testNativeDedupe(t *testing.T, h Harness) {
	p, topic, s := needs(t, h, "NativeDedupe", func(c Capabilities) bool { return c.NativeDedupe })
	dup := event("k", 0)
	marker := event("k", 1)
	publishOK(t, p, []broker.Message{message(topic, dup)})
	publishOK(t, p, []broker.Message{message(topic, dup), message(topic, marker)})
	ds := receive(t, s, 2, true)
	if a, b := decode(t, ds[0]).ID, decode(t, ds[1]).ID; a != dup.ID || b != marker.ID {
		t.Fatalf("received %s, %s; want %s once then %s", a, b, dup.ID, marker.ID)
	}
	adaptertest.Silent(t, s, quietPeriod, "the duplicate must not be stored")
}
