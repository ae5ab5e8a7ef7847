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
	// The idle back-off's cap: DefaultIdlePollMax at the default poll, or a longer PollInterval
	// (no back-off) so that a slow poll set alone stays valid.
	if c.PollInterval != relay.DefaultPollInterval || c.IdlePollMax != relay.DefaultIdlePollMax {
		t.Fatalf("PollInterval %v, IdlePollMax %v: want the defaults", c.PollInterval, c.IdlePollMax)
	}
	// A short poll interval set alone keeps its back-off within twice
	// itself: the rows after a quiet spell wait about what was asked for.
	for poll, want := range map[time.Duration]time.Duration{10 * time.Millisecond: 20 * time.Millisecond, 30 * time.Millisecond: 60 * time.Millisecond, 80 * time.Millisecond: relay.DefaultIdlePollMax} {
		if got := (relay.Config{PollInterval: poll}).WithDefaults().IdlePollMax; got != want {
			t.Errorf("IdlePollMax with a %v poll interval = %v, want %v", poll, got, want)
		}
	}
	slow := relay.Config{PollInterval: 2 * time.Second}
	if got := slow.WithDefaults().IdlePollMax; got != 2*time.Second {
		t.Fatalf("IdlePollMax with a 2s poll interval = %v, want 2s", got)
	}
	if err := slow.ValidateSettings(); err != nil {
		t.Fatal(err)
	}
	if err := (relay.Config{PollInterval: time.Second, IdlePollMax: 500 * time.Millisecond}).ValidateSettings(); err == nil {
		t.Error("IdlePollMax below PollInterval accepted")
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
