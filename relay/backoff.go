package relay

import (
	"math/rand/v2"
	"time"
)

// backoff returns the delay before attempt+1, for a row that has failed
// attempt times. Equal jitter: half the exponential step is fixed, half is
// random, so retries of many rows spread out while every row's delays still
// grow from one attempt to the next.
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + rand.N(half+1)
}
