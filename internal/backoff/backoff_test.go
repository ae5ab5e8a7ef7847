package backoff

import (
	"testing"
	"time"
)

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	base, max := time.Second, 300*time.Second
	for attempt := 1; attempt <= 12; attempt++ {
		step := min(base<<(attempt-1), max)
		for range 200 {
			d := Delay(attempt, base, max)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
	// The range check above also proves the ordering: the lowest delay of
	// attempt n+1 (step/2 of a doubled step) is the highest of attempt n.
	if d := Delay(40, base, max); d > max || d < max/2 {
		t.Fatalf("cap: %v", d)
	}
}
