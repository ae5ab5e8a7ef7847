package relay_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// countingStore counts the claims that reach the store, of either kind,
// records when each started and ended, and makes each take at least delay
// (the claim cadence tests, cadence_test.go).
type countingStore struct {
	*postgres.Store
	claims atomic.Int64
	delay  time.Duration
	mu     sync.Mutex
	starts []time.Time
	ends   []time.Time
}

func (c *countingStore) started() {
	c.claims.Add(1)
	c.mu.Lock()
	c.starts = append(c.starts, time.Now())
	c.mu.Unlock()
	time.Sleep(c.delay)
}

func (c *countingStore) ended() {
	c.mu.Lock()
	c.ends = append(c.ends, time.Now())
	c.mu.Unlock()
}

func (c *countingStore) ClaimTx(ctx context.Context, limit int) (claimapi.Claim, error) {
	c.started()
	defer c.ended()
	return c.Store.ClaimTx(ctx, limit)
}

func (c *countingStore) ClaimTxChained(ctx context.Context, limit int) (claimapi.ChainedClaim, error) {
	c.started()
	defer c.ended()
	return c.Store.ClaimTxChained(ctx, limit)
}

func (c *countingStore) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	c.started()
	defer c.ended()
	return c.Store.Claim(ctx, req)
}

// waitsAfter returns the relay's first n waits between claims (from a
// claim's end to the next one's start) among the claims started after t,
// waiting up to d for them. The claims' own time is left out, so a loaded
// machine's slow claims do not count as waiting.
func (c *countingStore) waitsAfter(t time.Time, n int, d time.Duration) []time.Duration {
	deadline := time.Now().Add(d)
	for {
		c.mu.Lock()
		var waits []time.Duration
		for i := range c.starts {
			if c.starts[i].After(t) && i+1 < len(c.starts) && i < len(c.ends) {
				waits = append(waits, c.starts[i+1].Sub(c.ends[i]))
			}
		}
		c.mu.Unlock()
		if len(waits) >= n || time.Now().After(deadline) {
			return waits[:min(n, len(waits))]
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// claimsOver counts the claims the store sees during d.
func (c *countingStore) claimsOver(d time.Duration) int64 {
	n := c.claims.Load()
	time.Sleep(d)
	return c.claims.Load() - n
}

// TestIdleRelayBacksOff (issue 21): an idle relay's claims thin out. While
// they find nothing, its wait doubles from PollInterval up to IdlePollMax,
// so over a second of idling it claims about 1s/IdlePollMax times instead
// of 1s/PollInterval; the first event after the idle spell still arrives
// within IdlePollMax (+ slack), and the delivery sets the wait back to
// PollInterval.
func TestIdleRelayBacksOff(t *testing.T) { eachClaims(t, testIdleBackOff) }

func testIdleBackOff(t *testing.T, claims relay.ClaimMode) {
	const poll, idleMax = 10 * time.Millisecond, 400 * time.Millisecond
	s := &countingStore{Store: openPG(t)}
	b := membroker.New(membroker.Options{})
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: claims, PollInterval: poll, IdlePollMax: idleMax})
	if got := r.Config().IdlePollMax; got != idleMax {
		t.Fatalf("IdlePollMax %v, want %v", got, idleMax)
	}
	testenv.WaitFor(t, time.Minute, "the relay's first (empty) claim", func() bool { return r.Stats().IdleWaits >= 1 })
	// 10+20+40+...+320+400 ms: at the cap after about 1 s of idling.
	time.Sleep(1500 * time.Millisecond)

	// Idle at the cap: about 1s/400ms = 2-3 claims in a second; without
	// the back-off, 1s/10ms = 100 less the claims' own time.
	if n := s.claimsOver(time.Second); n > 6 {
		t.Fatalf("an idle relay claimed %d times in 1s: want about 1s/%v (2-3), not 1s/%v", n, idleMax, poll)
	} else {
		t.Logf("idle at the cap: %d claims in 1s", n)
	}

	// The first event after the idle spell: found by the next claim, at
	// most IdlePollMax away.
	for i := range 2 {
		ev := txbox.MustEvent("Order", "after-idle", "Created", nil)
		start := time.Now()
		write(t, s.Store, ev)
		testenv.WaitFor(t, time.Minute, "the event after the idle spell", func() bool { return len(b.Messages()) == i+1 })
		if d := time.Since(start); d > idleMax+300*time.Millisecond {
			t.Fatalf("event %d after an idle spell took %v, want at most IdlePollMax %v + 300ms", i, d, idleMax)
		}
		// Delivering set the wait back to PollInterval: the claims that
		// follow come after waits of 10, 20, 40 ms (or the end of the
		// delivering batch), where a relay still at the cap would wait
		// 400 ms each time. The waits, not a count of claims in a fixed
		// window: on a loaded machine one claim can take longer than that
		// window.
		waits := s.waitsAfter(start, 3, 5*time.Second)
		if len(waits) < 3 {
			t.Fatalf("after a delivery the relay claimed %d more times in 5 s", len(waits)+1)
		}
		for _, w := range waits {
			if w >= idleMax/2 {
				t.Fatalf("after a delivery the relay waited %v between claims: its wait was not set back to PollInterval %v (waits %v)", w, poll, waits)
			}
		}
		time.Sleep(1500 * time.Millisecond) // back at the cap
	}
}
