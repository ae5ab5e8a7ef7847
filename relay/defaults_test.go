package relay_test

import (
	"testing"
	"time"

	"github.com/txbox/txbox/relay"
)

func TestWithDefaults(t *testing.T) {
	c := relay.Config{}.WithDefaults()
	if c.BatchSize != relay.DefaultBatchSize || c.Workers != relay.DefaultWorkers || c.Lease != relay.DefaultLease ||
		c.PublishTimeout != relay.DefaultPublishTimeout || c.MaxAttempts != relay.DefaultMaxAttempts ||
		c.Source != relay.DefaultSource || c.ID == "" || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	// The publish timeout follows a short lease, so the defaults never
	// contradict Validate's "at most half of Lease".
	short := relay.Config{Lease: 15 * time.Second}.WithDefaults()
	if short.PublishTimeout != 5*time.Second {
		t.Fatalf("PublishTimeout with a 15s lease = %v, want 5s", short.PublishTimeout)
	}
	if err := short.ValidateSettings(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []relay.ClaimMode{"", relay.ClaimAuto, relay.ClaimLease} {
		if err := (relay.Config{Claims: m}).ValidateSettings(); err != nil {
			t.Errorf("Claims %q: %v", m, err)
		}
	}
	if err := (relay.Config{Claims: "fenced"}).ValidateSettings(); err == nil {
		t.Error("Claims \"fenced\" accepted")
	}
}
