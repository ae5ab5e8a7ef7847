package storetest

import (
	"sync"
	"testing"
	"time"
)

// runClaimers runs workers goroutines, each calling claim with its number
// and round, up to 2000 rounds, until maxEmpty rounds in a row found
// nothing (claim returns how many rows it got; it pauses pause after an
// empty round). A worker stops at its first error; the first error of all
// fails t once every worker has stopped.
func runClaimers(t *testing.T, workers, maxEmpty int, pause time.Duration, claim func(worker, round int) (int, error)) {
	t.Helper()
	var (
		mu     sync.Mutex
		failed error
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			empty := 0
			for i := 0; i < 2000 && empty < maxEmpty; i++ {
				n, err := claim(w, i)
				if err != nil {
					mu.Lock()
					if failed == nil {
						failed = err
					}
					mu.Unlock()
					return
				}
				if n == 0 {
					empty++
					time.Sleep(pause)
					continue
				}
				empty = 0
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
}

// claimedOnce fails unless every one of want events was claimed exactly once.
func claimedOnce(t *testing.T, seen map[string]int, want int) {
	t.Helper()
	if len(seen) != want {
		t.Fatalf("claimed %d distinct events of %d", len(seen), want)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s claimed %d times", id, n)
		}
	}
}
