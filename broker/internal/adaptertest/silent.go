package adaptertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
)

// Silent fails the test if s delivers anything within d, or its Receive
// ends otherwise than by d running out; why says what a delivery would
// have meant.
func Silent(t testing.TB, s broker.Subscriber, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := s.Receive(ctx, 10)
	if err == nil {
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.Raw().ID)
		}
		t.Fatalf("%s, but received %d more: %v", why, len(ds), ids)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive while waiting for silence: %v", err)
	}
}
