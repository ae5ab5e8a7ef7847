package relay_test

import (
	"slices"
	"testing"
	"time"

	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
)

// gaps returns the times between the starts of consecutive claims after
// the first few (the relay's start-up), sorted.
func (s *countingStore) gaps(t *testing.T, n int) []time.Duration {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "enough claims", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.starts) >= n+3
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 3; i < n+3; i++ {
		g = append(g, s.starts[i].Sub(s.starts[i-1]))
	}
	slices.Sort(g)
	return g
}

// TestPollIntervalRunsFromClaimStart (issue 21): on an idle relay the poll
// interval runs from the start of the claim that found nothing, so a row
// committed just after that claim's snapshot waits one interval for the
// next claim, not an interval plus the claim's time. A claim slower than
// half the interval still leaves half of it as a pause, so a slow claim
// does not turn an idle relay into one that claims back to back.
func TestPollIntervalRunsFromClaimStart(t *testing.T) {
	eachClaims(t, func(t *testing.T, claims relay.ClaimMode) {
		const poll = 100 * time.Millisecond
		t.Run("claim shorter than half the interval", func(t *testing.T) {
			s := &countingStore{Store: openPG(t), delay: 20 * time.Millisecond}
			run(t, relay.Config{Store: s, Publisher: membroker.New(membroker.Options{}), Claims: claims, PollInterval: poll, IdlePollMax: poll})
			g := s.gaps(t, 9)
			// One interval start to start (100ms, while the claim takes
			// under half of it); counted from the claim's end it would be
			// 120ms and more.
			if med := g[len(g)/2]; med > poll+12*time.Millisecond {
				t.Fatalf("median time between idle claims' starts %v (all %v), want about PollInterval %v: the wait must not add the claim's time", med, g, poll)
			}
		})
		t.Run("claim longer than half the interval", func(t *testing.T) {
			s := &countingStore{Store: openPG(t), delay: 160 * time.Millisecond}
			run(t, relay.Config{Store: s, Publisher: membroker.New(membroker.Options{}), Claims: claims, PollInterval: poll, IdlePollMax: poll})
			g := s.gaps(t, 5)
			// 160ms of claim and at least half the interval (50ms) of pause.
			if g[0] < 205*time.Millisecond {
				t.Fatalf("shortest time between idle claims' starts %v (all %v), want the claim's 160ms + half the interval", g[0], g)
			}
		})
	})
}
