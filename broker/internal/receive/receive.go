// Package receive holds what the Subscribers' Receive methods share: the
// batch size they serve and the signal that wakes a waiting Receive.
package receive

// Max is the most deliveries a Receive(ctx, max) returns: max, or 1 when
// max is not positive, since a Receive returns at least one delivery.
func Max(max int) int {
	if max <= 0 {
		return 1
	}
	return max
}
