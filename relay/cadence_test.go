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

// excess returns, for n idle claims after the first few, how much longer
// the wait after each was than the relay's rule for it (the poll interval
// less the claim's own time, at least half the interval), sorted.
func (s *countingStore) excess(t *testing.T, n int, poll time.Duration) []time.Duration {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "enough claims", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.starts) >= n+4 && len(s.ends) >= n+3
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var ex []time.Duration
	for i := 3; i < n+3; i++ {
		took := s.ends[i].Sub(s.starts[i])
		ex = append(ex, s.starts[i+1].Sub(s.ends[i])-max(poll-took, poll/2))
	}
	slices.Sort(ex)
	return ex
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
			const delay = 40 * time.Millisecond
			s := &countingStore{Store: openPG(t), delay: delay}
			run(t, relay.Config{Store: s, Publisher: membroker.New(membroker.Options{}), Claims: claims, PollInterval: poll, IdlePollMax: poll})
			// Each wait after a claim is measured against what it should
			// be given that claim's own time (a loaded machine makes claims
			// slower, which must not count): the interval less the claim's
			// time, but at least half the interval. Counted from the
			// claim's end, each wait would be the whole interval: an excess
			// of the claim's time (40ms and more).
			ex := s.excess(t, 9, poll)
			if med := ex[len(ex)/2]; med > delay/2 {
				t.Fatalf("median wait after an idle claim exceeds the interval less the claim's time by %v (all %v), want about 0: the wait must not add the claim's time", med, ex)
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
