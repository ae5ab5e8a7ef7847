// Package backoff computes retry delays for the relay and the inbox.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait after the attempt-th failure. Equal jitter: half
// the exponential step is fixed, half is random, so retries of many rows
// spread out while each row's delays still grow from one attempt to the next
// (the lowest delay of attempt n+1 is the highest of attempt n).
func Delay(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + rand.N(half+1)
}
