package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Production is what the producers did, as they saw it. Its counts are
// logged; what the checker trusts is the ledger table (see pgLedgerDDL).
type Production struct {
	mu         sync.Mutex
	Committed  int
	RolledBack map[string]bool // event ids of transactions rolled back on purpose
	Errors     int
	wait       func()
}

// Wait returns when every producer has stopped.
func (p *Production) Wait() { p.wait() }

var errRollback = errors.New("rolled back on purpose")

// Produce runs n producers until ctx ends. Each transaction bumps its
// order's version under the row lock, so an aggregate's versions are
// contiguous and in commit order, and writes the event with that version.
// A share of transactions roll back on purpose; a share of aggregates are
// hot and get most of the events.
func Produce(ctx context.Context, w *World, producers int, rate float64, seed uint64, rollbackShare float64) *Production {
	p := &Production{RolledBack: map[string]bool{}}
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			pace := time.Duration(float64(time.Second) * float64(producers) / rate)
			next := time.Now()
			for ctx.Err() == nil {
				var agg string
				switch {
				case w.Skew.Load() && rng.Float64() < 0.9:
					agg = fmt.Sprintf("hot-%d", rng.IntN(3)) // the skewed-keys fault: three hot aggregates take 90%
				case rng.Float64() < 0.5:
					agg = fmt.Sprintf("hot-%d", rng.IntN(5)) // five hot aggregates take half the events
				default:
					agg = fmt.Sprintf("order-%d", rng.IntN(2000))
				}
				rollback := rng.Float64() < rollbackShare
				evID, err := w.DB.Write(ctx, agg, rollback)
				p.mu.Lock()
				switch {
				case errors.Is(err, errRollback):
					p.RolledBack[evID] = true
				case err != nil:
					if ctx.Err() == nil {
						p.Errors++
					}
				default:
					p.Committed++
				}
				p.mu.Unlock()
				next = next.Add(pace)
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(d):
					}
				} else {
					next = time.Now()
				}
			}
		}()
	}
	p.wait = wg.Wait
	return p
}
